package container

import (
	"fmt"

	"github.com/psych-runtime/psych/sandbox"
)

// ErrImageNotFound: the configured image is not in the engine's store. It
// wraps sandbox.ErrInvalidConfig: images are never pulled implicitly, so a
// missing one is a configuration error at New, never a first Run's.
var ErrImageNotFound = fmt.Errorf("container image not found: %w", sandbox.ErrInvalidConfig)

// ErrEngineUnreachable: the engine named in Config.Engine (or, with none
// named, every engine) cannot be reached. It wraps sandbox.ErrInvalidConfig.
var ErrEngineUnreachable = fmt.Errorf("container engine unreachable: %w", sandbox.ErrInvalidConfig)

//go:build !linux

package resources

import (
	"context"
	"fmt"

	"github.com/psych-runtime/psych/sandbox"
)

// Claim needs OFD locks (Linux): elsewhere it fails with ErrInvalidConfig.
func (r IDs) Claim(ctx context.Context, span uint32) (uint32, func(), error) {
	return 0, nil, fmt.Errorf("%w: outside ids are claimed with OFD locks, which only Linux has", sandbox.ErrInvalidConfig)
}

package psych_test

import (
	"testing"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/store/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) psych.Store { return psych.NewMemoryStore() })
}

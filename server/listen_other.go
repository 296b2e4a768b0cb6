//go:build !unix

package server

import (
	"errors"
	"os"
)

func flock(*os.File) error { return errors.New("unix sockets need a unix host") }

const oNoFollow = 0

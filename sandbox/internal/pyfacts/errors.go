package pyfacts

import "errors"

// Sentinel errors. Others are wrapped with %w; test with errors.Is.
var (
	// ErrInvalidOptions: the Options cannot work (a relative Dir).
	ErrInvalidOptions = errors.New("invalid interpreter facts options")
	// ErrBadFacts: what the interpreter printed (or an entry held) is not
	// usable facts.
	ErrBadFacts = errors.New("bad interpreter facts")
	// ErrUnsupportedPython: the interpreter is older than the bootstrap
	// serves (MinPython).
	ErrUnsupportedPython = errors.New("unsupported Python version")
	// ErrNoExecutable: the running executable cannot be identified
	// (SelfID, LoadExeBlob), so nothing can be cached under it.
	ErrNoExecutable = errors.New("this executable cannot be identified")
	// ErrBadFontList: what the font probe printed or wrote (or an entry
	// held) is not a font list matplotlib would take (LoadFontList).
	ErrBadFontList = errors.New("bad matplotlib font list")
	// ErrNoMatplotlib: the interpreter has no matplotlib where a font list
	// is looked for (LoadFontList): nothing to build.
	ErrNoMatplotlib = errors.New("no matplotlib for this interpreter")
)

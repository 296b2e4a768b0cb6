// Command mkimage writes the image archive `make image` imports: a one-layer
// image of a root filesystem directory (package ociarchive).
//
//	mkimage -root DIR -ref REF [-label K=V]... [-env K=V]... [-cmd ARG]... [-empty DIR]... -o FILE
//
// It prints the manifest digest. FILE is written whole or not at all.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/psych-runtime/psych/internal/ociarchive"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var root, ref, out string
	var labels, env, cmd, empty list
	flag.StringVar(&root, "root", "", "the root filesystem directory")
	flag.StringVar(&ref, "ref", "", "the image name")
	flag.StringVar(&out, "o", "", "the archive to write")
	flag.Var(&labels, "label", "a label K=V (repeatable)")
	flag.Var(&env, "env", "an environment variable K=V (repeatable)")
	flag.Var(&cmd, "cmd", "an argument of the default command (repeatable)")
	flag.Var(&empty, "empty", "a directory, relative to the root, kept empty (repeatable)")
	flag.Parse()
	if root == "" || ref == "" || out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -root DIR -ref REF [-label K=V]... [-env K=V]... [-cmd ARG]... [-empty DIR]... -o FILE")
		os.Exit(2)
	}
	o := ociarchive.Options{Ref: ref, Env: env, Cmd: cmd, Empty: empty, Labels: map[string]string{}}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			fmt.Fprintf(os.Stderr, "mkimage: label %q: want K=V\n", l)
			os.Exit(2)
		}
		o.Labels[k] = v
	}
	if err := write(root, out, o); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func write(root, out string, o ociarchive.Options) (retErr error) {
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	img, err := ociarchive.Write(f, root, filepath.Dir(out), o)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return err
	}
	fmt.Println(img.Manifest)
	return nil
}

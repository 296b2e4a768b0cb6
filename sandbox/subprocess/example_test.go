package subprocess_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

// These examples are docs/go-api.md's snippets, checked by the compiler.
// They have no Output line, so go test compiles them without running them:
// an example cannot skip on a host that lacks what a run needs.

// ExampleNew runs one program and reads its result.
func ExampleNew() {
	ctx := context.Background()
	var myBindings sandbox.Bindings // the host functions the program may call, or nil

	sb, err := subprocess.New(subprocess.Config{PythonBin: "/usr/bin/python3"})
	if err != nil {
		log.Fatal(err) // configuration: interpreter, run user, limits
	}
	defer sb.Close() // a run's cgroup and directory are removed after its result; Close (or Settle) waits
	res, err := sb.Run(ctx, sandbox.Request{
		Code:     "total = sum(range(10))\nprint(total)\ntotal * 2",
		Limits:   sandbox.Limits{WallSeconds: 5}, // zero fields keep the defaults
		Bindings: myBindings,                     // sandbox.Bindings, or nil
	})
	if err != nil {
		log.Fatal(err) // the sandbox could not run (never a program failure)
	}
	if res.Failure != nil {
		fmt.Print(res.Failure.Traceback)
	}
	fmt.Println(string(res.Value)) // 90
}

// ExampleNew_pool keeps fresh, never-used sandboxes started ahead of the
// requests (warm start).
func ExampleNew_pool() {
	ctx := context.Background()
	sb, err := subprocess.New(subprocess.Config{
		PythonBin:    "/usr/bin/python3",
		EnvAllowlist: []string{"TZ", "API_REGION"},
		Pool: &sandbox.PoolConfig{
			Size:   4,                              // sandboxes kept ready
			MaxAge: 5 * time.Minute,                // older ones are destroyed unused
			Caps:   sandbox.Limits{CPUSeconds: 60}, // the most a warm request may ask; zero fields: the defaults
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close() // destroys the pool; waits for every removal
	res, err := sb.Run(ctx, sandbox.Request{
		Code:   "import os\nos.environ['API_REGION']",
		Env:    map[string]string{"API_REGION": "eu"}, // names on the allowlist; set before the first line
		Limits: sandbox.Limits{CPUSeconds: 1},         // applied at dispatch; the budget counts from it
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Isolation.Warm, res.Isolation.AgeSeconds) // true, the sandbox's age
}

// ExampleNew_files hands a CSV in and takes the files the program wrote
// back (docs/files-and-figures.md).
func ExampleNew_files() {
	ctx := context.Background()
	sb, err := subprocess.New(subprocess.Config{PythonBin: "/usr/bin/python3"})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(ctx, sandbox.Request{
		Code: "import csv\nrows = list(csv.DictReader(open('sales.csv')))\n" +
			"open('total.txt', 'w').write(str(sum(int(r['amount']) for r in rows)))",
		Files: []sandbox.File{{Path: "sales.csv", Data: []byte("day,amount\nmon,3\ntue,4\n")}}, // into /work
	})
	if err != nil {
		log.Fatal(err) // a bad path or a cap: sandbox.ErrInvalidRequest, and nothing ran
	}
	for _, f := range res.Files { // created or changed in /work: total.txt
		fmt.Println(f.Path, f.Size, f.SHA256, string(f.Data)) // total.txt 1 … 7
	}
	for _, o := range res.FilesOmitted { // never a silent drop
		fmt.Println("left out:", o.Path, o.Reason)
	}
}

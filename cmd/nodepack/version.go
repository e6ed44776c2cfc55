package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version or VCS revision from the build info is used.
var version = ""

func nodepackVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("version", pflag.ContinueOnError)
	if code, ok := parseFlags(ctx, fs, "Usage: nodepack version\n\nExample:\n  nodepack version", args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintf(stdout, "nodepack %s\n", nodepackVersion())
	return exitOK
}

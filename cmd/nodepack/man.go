package main

import (
	"context"
	"io"
	"strings"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/spf13/pflag"
)

const manUsage = `Usage: nodepack man

Prints nodepack's manual page, in roff, made from every command's --help:
what each command does, its flags with their defaults, its examples, and
the exit statuses.

Examples:
  nodepack man | man -l -
  mkdir -p ~/.local/share/man/man1 && nodepack man > ~/.local/share/man/man1/nodepack.1`

func runMan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("man", pflag.ContinueOnError)
	if code, ok := parseFlags(ctx, fs, manUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageErrorf(stderr, "man", "takes no arguments, got %d", fs.NArg())
	}
	intro, _, _ := strings.Cut(mainUsage, "\n\n")
	clidoc.Man(stdout, cliDocs(), intro, nodepackVersion())
	return exitOK
}

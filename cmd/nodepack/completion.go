package main

import (
	"context"
	"io"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/spf13/pflag"
)

const completionUsage = `Usage: nodepack completion bash|zsh|fish

Prints the shell's completion script for nodepack: commands, each
command's flags, the words a flag takes (--format, --class), directories
for the commands that read a sweep's output, files for task files. It is
made from the commands' own --help, so it is as new as the binary.

Examples:
  source <(nodepack completion bash)   # bash: this line in ~/.bashrc
  mkdir -p ~/.zfunc && nodepack completion zsh > ~/.zfunc/_nodepack   # zsh: fpath+=(~/.zfunc) before compinit
  mkdir -p ~/.config/fish/completions && nodepack completion fish > ~/.config/fish/completions/nodepack.fish`

func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("completion", pflag.ContinueOnError)
	if code, ok := parseFlags(ctx, fs, completionUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "completion", "want one shell (bash, zsh or fish), got %d arguments", fs.NArg())
	}
	docs := cliDocs()
	switch fs.Arg(0) {
	case "bash":
		clidoc.Bash(stdout, docs)
	case "zsh":
		clidoc.Zsh(stdout, docs)
	case "fish":
		clidoc.Fish(stdout, docs)
	default:
		return usageErrorf(stderr, "completion", "%q: nodepack writes completion for bash, zsh and fish", fs.Arg(0))
	}
	return exitOK
}

// cliDocs describes every command from its own flag set, usage and flag
// groups, for the completion scripts and the manual page.
func cliDocs() []clidoc.Command {
	var docs []clidoc.Command
	for _, c := range commands() {
		h := describe(c)
		d := clidoc.Command{Name: c.name, Summary: c.summary, Operands: c.operands, Usage: h.usage, Flags: h.flags}
		if g, ok := helpGroups[c.name]; ok {
			d.Groups, d.Details = g.groups, g.details
		}
		docs = append(docs, d)
	}
	return docs
}

package main

// The completion scripts are tested in the real shells, as a user's Tab
// runs them: bash calls the function with COMP_WORDS set, zsh is driven
// through a pseudo-terminal (zpty) with compsys loaded, fish answers
// complete -C. Each shell must give the same answers to the same lines.

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
)

// completionCases are lines typed up to the cursor, and what Tab must
// offer there (and must not).
var completionCases = []struct {
	line    string
	want    []string
	notWant []string
}{
	{"nodepack ", []string{"run", "status", "completion", "man", "version"}, nil},
	{"nodepack ru", []string{"run"}, []string{"report"}},
	{"nodepack run --par", []string{"--parallel", "--params"}, []string{"--prune"}},
	{"nodepack run -o ", []string{"outdir"}, []string{"tasks.txt"}},
	{"nodepack run tas", []string{"tasks.txt"}, nil},
	{"nodepack run --gpu-ids ", []string{"uuid", "index"}, []string{"tasks.txt"}},
	{"nodepack run --sweep -- bas", []string{"bash"}, nil},
	{"nodepack status ", []string{"outdir"}, []string{"tasks.txt"}},
	{"nodepack status --format ", []string{"table", "csv", "json"}, []string{"tasks.txt"}},
	{"nodepack status --format=c", []string{"csv"}, []string{"json"}},
	{"nodepack retry --class cu", []string{"cuda-oom"}, nil},
	{"nodepack submit --slurm -- --par", []string{"--parallel", "--params"}, nil},
	{"nodepack submit --slurm -- --params tas", []string{"tasks.txt"}, nil},
	{"nodepack completion ", []string{"bash", "zsh", "fish"}, nil},
}

// completionDir is where the lines are completed: a sweep's output
// directory and a task file.
func completionDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "outdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tasks.txt", "echo hi\n")
	return dir
}

// completionScript writes nodepack completion SHELL into dir.
func completionScript(t *testing.T, dir, shell, name string) string {
	code, out, stderr := runCLI(t, "completion", shell)
	if code != exitOK {
		t.Fatalf("completion %s: exit %d: %s", shell, code, stderr)
	}
	return writeFile(t, dir, name, out)
}

// needShell skips without the shell, except in CI, which installs it.
func needShell(t *testing.T, shell string) string {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		if os.Getenv("NODEPACK_CI") != "" {
			t.Fatalf("%s is not installed, and CI needs this test", shell)
		}
		t.Skipf("%s is not installed (apt-get install %s)", shell, shell)
	}
	return path
}

// checkCompletions compares what a shell offered for each line with the
// cases; got maps a line to its candidates (a trailing / and a --flag=
// prefix taken off).
func checkCompletions(t *testing.T, shell string, got map[string][]string) {
	t.Helper()
	for _, c := range completionCases {
		var words []string
		for _, w := range got[c.line] {
			w = strings.TrimSuffix(w, "/")
			if i := strings.LastIndexByte(w, '='); i >= 0 && strings.HasPrefix(w, "--") {
				w = w[i+1:]
			}
			words = append(words, w)
		}
		for _, w := range c.want {
			if !slices.Contains(words, w) {
				t.Errorf("%s: %q<Tab> offers %q, want %q among them", shell, c.line, words, w)
			}
		}
		for _, w := range c.notWant {
			if slices.Contains(words, w) {
				t.Errorf("%s: %q<Tab> offers %q: it should not offer %q", shell, c.line, words, w)
			}
		}
	}
}

// everyFlagLine is, for each command, the line that completes its flags:
// "nodepack CMD --"; what it must offer is every long flag of the command.
func everyFlag(t *testing.T, shell string, complete func(lines []string) map[string][]string) {
	t.Helper()
	var lines []string
	for _, d := range cliDocs() {
		lines = append(lines, "nodepack "+d.Name+" --")
	}
	got := complete(lines)
	for _, d := range cliDocs() {
		line := "nodepack " + d.Name + " --"
		for _, f := range append(clidoc.FlagsOf(d), clidoc.Flag{Long: "help"}) {
			if !slices.ContainsFunc(got[line], func(w string) bool { return strings.TrimRight(w, "=") == "--"+f.Long }) {
				t.Errorf("%s: %q<Tab> does not offer --%s (it offered %q)", shell, line, f.Long, got[line])
			}
		}
	}
}

func caseLines() []string {
	var lines []string
	for _, c := range completionCases {
		lines = append(lines, c.line)
	}
	return lines
}

func TestCompletionBash(t *testing.T) {
	bash := needShell(t, "bash")
	dir := completionDir(t)
	script := completionScript(t, dir, "bash", "nodepack.bash")
	complete := func(lines []string) map[string][]string {
		// Each line split as bash splits it for completion (COMP_WORDBREAKS
		// splits --flag=value at the =), the function called, COMPREPLY printed.
		var drive strings.Builder
		drive.WriteString("source " + bashWord(script) + "\n")
		drive.WriteString(`complete_line() {
    local line=$1
    COMP_LINE=$line COMP_POINT=${#line}
    read -ra COMP_WORDS <<<"${line//=/ = }"
    [[ $line == *' ' || $line == *= ]] && COMP_WORDS+=('')
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _nodepack
    printf '%s\n' "@@ $line" "${COMPREPLY[@]}"
}
`)
		for _, l := range lines {
			drive.WriteString("complete_line " + bashWord(l) + "\n")
		}
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", drive.String())
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return splitAnswers(string(out), "@@ ")
	}
	checkCompletions(t, "bash", complete(caseLines()))
	everyFlag(t, "bash", complete)
}

func TestCompletionFish(t *testing.T) {
	fish := needShell(t, "fish")
	dir := completionDir(t)
	script := completionScript(t, dir, "fish", "nodepack.fish")
	complete := func(lines []string) map[string][]string {
		var drive strings.Builder
		drive.WriteString("source " + fishWord(script) + "\n")
		for _, l := range lines {
			drive.WriteString("echo " + fishWord("@@ "+l) + "\ncomplete -C " + fishWord(l) + "\n")
		}
		cmd := exec.Command(fish, "--no-config", "-c", drive.String())
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		answers := splitAnswers(string(out), "@@ ")
		for line, words := range answers {
			for i, w := range words {
				words[i], _, _ = strings.Cut(w, "\t") // the description
			}
			answers[line] = words
		}
		return answers
	}
	checkCompletions(t, "fish", complete(caseLines()))
	everyFlag(t, "fish", complete)
}

// zshDriver types each line into an interactive zsh in a pseudo-terminal,
// with compsys and nodepack's function loaded and compadd wrapped to
// print what it adds, then a key (^T, a prefix of no other) bound to a widget that completes, prints
// a numbered marker and clears the line: all in one widget, so that no
// key waits as type-ahead while completion runs (zsh cuts completion
// short then), and no listing waits for a key (auto-list off).
const zshDriver = `zmodload zsh/zpty
dir=$1; shift
zpty z zsh -f -i
zpty -w z "PS1=''; PROMPT_EOL_MARK=''; unsetopt autolist listbeep beep; fpath=(${(q)dir} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z 'compadd () { if (( ${@[(I)-[OAD]]} )); then builtin compadd "$@"; return; fi; local -a h; builtin compadd -A h "$@"; (( $#h )) && print -r -- "<hits>" ${(j: :)h} "</hits>"; builtin compadd "$@"; }'
zpty -w z '_np_n=0; _np_tab() { zle complete-word; print -r -- "@@done$((++_np_n))@@"; BUFFER=; zle -R; }; zle -N _np_tab; bindkey "^T" _np_tab'
zpty -w z 'zstyle ":completion:*" menu no; zstyle ":completion:*" list-prompt ""; print -r -- @@done$((0*1))@@'
out=
while zpty -r z chunk; do out+=$chunk; [[ $out == *@@done0@@* ]] && break; done
i=0
for line in "$@"; do
  (( i++ ))
  zpty -w -n z "$line"$'\C-t'
  while zpty -r z chunk; do out+=$chunk; [[ $out == *@@done$i@@* ]] && break; done
done
print -r -- $out
zpty -d z
`

func TestCompletionZsh(t *testing.T) {
	zsh := needShell(t, "zsh")
	dir := completionDir(t)
	fpath := filepath.Join(dir, "zfunc")
	os.Mkdir(fpath, 0o755)
	completionScript(t, fpath, "zsh", "_nodepack")
	driver := writeFile(t, dir, "drive.zsh", zshDriver)
	hits := regexp.MustCompile(`<hits> (.*?) </hits>`)
	marker := regexp.MustCompile(`@@done(\d+)@@`)
	complete := func(lines []string) map[string][]string {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang, not a speed limit
		defer cancel()
		cmd := exec.CommandContext(ctx, zsh, append([]string{"-f", driver, fpath}, lines...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "ZDOTDIR="+dir, "TERM=xterm")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
		answers := map[string][]string{}
		// The terminal's output, cut at each line's marker: what the
		// wrapped compadd printed before marker i is line i's.
		text := strings.ReplaceAll(string(out), "\r", "\n")
		bounds := marker.FindAllStringSubmatchIndex(text, -1)
		for k := 1; k < len(bounds) && k <= len(lines); k++ {
			seg := text[bounds[k-1][1]:bounds[k][0]]
			for _, m := range hits.FindAllStringSubmatch(seg, -1) {
				answers[lines[k-1]] = append(answers[lines[k-1]], strings.Fields(m[1])...)
			}
		}
		if len(bounds) != len(lines)+1 {
			t.Fatalf("zsh answered %d of %d lines:\n%s", len(bounds)-1, len(lines), out)
		}
		return answers
	}
	checkCompletions(t, "zsh", complete(caseLines()))
	everyFlag(t, "zsh", complete)
}

// splitAnswers cuts a shell's output at the lines that start with mark:
// each such line names a typed line, the lines after it are its answers.
func splitAnswers(out, mark string) map[string][]string {
	answers := map[string][]string{}
	var cur string
	for _, l := range strings.Split(out, "\n") {
		if line, ok := strings.CutPrefix(l, mark); ok {
			cur = line
			answers[cur] = []string{}
			continue
		}
		if l != "" {
			answers[cur] = append(answers[cur], l)
		}
	}
	return answers
}

func TestCompletionUnknownShell(t *testing.T) {
	code, _, stderr := runCLI(t, "completion", "tcsh")
	if code != exitUsage || !strings.Contains(stderr, `"tcsh"`) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("completion tcsh: exit %d, %q; want exit 2 and one line naming it", code, stderr)
	}
	if code, _, _ := runCLI(t, "completion"); code != exitUsage {
		t.Errorf("completion with no shell: exit %d, want 2", code)
	}
}

// TestManPage renders nodepack man with groff, warnings on: none may
// come, and the page holds every command and every one of its flags as
// --help spells them.
func TestManPage(t *testing.T) {
	groff := needShell(t, "groff")
	code, page, stderr := runCLI(t, "man")
	if code != exitOK {
		t.Fatalf("man: exit %d: %s", code, stderr)
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-c", "-P-b", "-P-u")
	cmd.Stdin = strings.NewReader(page)
	var out, warn strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &warn
	if err := cmd.Run(); err != nil {
		t.Fatalf("groff: %v\n%s", err, warn.String())
	}
	if warn.Len() > 0 {
		t.Errorf("groff warns:\n%s", warn.String())
	}
	// Joined as a reader sees it: hyphenated line ends rejoined, spaces collapsed.
	text := strings.Join(strings.Fields(strings.ReplaceAll(out.String(), "‐\n", "")), " ")
	for _, d := range cliDocs() {
		if !strings.Contains(text, "nodepack "+d.Name+" "+strings.ToUpper(d.Summary[:1])+strings.Fields(d.Summary)[0][1:]) {
			t.Errorf("the page has no section for %s", d.Name)
		}
		for _, f := range clidoc.FlagsOf(d) {
			if !strings.Contains(text, "--"+f.Long) {
				t.Errorf("the page lacks %s's --%s", d.Name, f.Long)
			}
		}
		usage, _, _ := strings.Cut(d.Usage, "\n")
		if !strings.Contains(text, strings.Join(strings.Fields(usage), " ")) {
			t.Errorf("the page lacks %s's usage line %q", d.Name, usage)
		}
	}
	for _, want := range []string{"EXIT STATUS", "128+signal"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

var updateCLI = flag.Bool("update-cli", false, "write docs/cli.md from the commands' help")

// TestCLIReference: docs/cli.md is what the commands' own help makes of
// it, so it can never say other than --help. go test ./cmd/nodepack -run
// TestCLIReference -update-cli writes it.
func TestCLIReference(t *testing.T) {
	var b strings.Builder
	clidoc.Markdown(&b, cliDocs())
	path := filepath.Join("..", "..", "docs", "cli.md")
	if *updateCLI {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != b.String() {
		t.Errorf("docs/cli.md is not what the commands' help makes: go test ./cmd/nodepack -run TestCLIReference -update-cli")
	}
	for _, d := range cliDocs() {
		for _, f := range clidoc.FlagsOf(d) {
			if !strings.Contains(string(have), "--"+f.Long) {
				t.Errorf("docs/cli.md lacks %s's --%s", d.Name, f.Long)
			}
		}
	}
}

// bashWord and fishWord quote s as one word of the shell, to drive it.
func bashWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
func fishWord(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// Package journey holds what the tests that type the README's commands on
// a real scheduler share: building nodepack, reading a block of the
// README, and reading what a sweep's directory records.
package journey

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds nodepack from the repository at root into a new temporary
// directory and returns the binary's path; remove its directory when done.
func Build(root string) (string, error) {
	bin, err := os.MkdirTemp("", "nodepack-bin-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(bin, "nodepack")
	build := exec.Command("go", "build", "-o", path, "./cmd/nodepack")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(bin)
		return "", fmt.Errorf("building nodepack: %w", err)
	}
	return path, nil
}

// Block returns the commands of the first sh block of the README at path
// that holds marker, one per line, without comments.
func Block(path, marker string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, block := range strings.Split(string(b), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, marker) {
			continue
		}
		var lines []string
		for _, l := range strings.Split(block, "\n") {
			if i := strings.Index(l, "   #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return lines, nil
	}
	return nil, fmt.Errorf("%s has no sh block with %q", path, marker)
}

// LastJob returns the job id of the newest submission recorded in the
// output directory out.
func LastJob(out string) (string, error) {
	b, err := os.ReadFile(filepath.Join(out, "submissions.jsonl"))
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var rec struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		return "", err
	}
	if rec.JobID == "" {
		return "", errors.New("the newest submission has no job id")
	}
	return rec.JobID, nil
}

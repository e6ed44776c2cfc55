package proc

import "os"

// MakeScratch makes a folder in base for the runs' private temporary
// directories, after removing those in base that a program killed with
// its supervisor left (see removeStaleScratch); the supervisor removes
// this one if the program dies. RemoveScratch removes it.
func MakeScratch(base string) (string, error) {
	removeStaleScratch(base)
	dir, err := os.MkdirTemp(base, scratchPrefix())
	if err != nil {
		return "", err
	}
	trackScratch(dir)
	return dir, nil
}

// RemoveScratch removes a folder MakeScratch made, and what is in it.
func RemoveScratch(dir string) {
	os.RemoveAll(dir)
	untrackScratch(dir)
}

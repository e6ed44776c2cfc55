//go:build unix

package untrusted

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openDir opens a trusted directory, links in its path followed.
func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError(path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openBelow opens rel below dir one component at a time, following no
// symbolic link: each directory with O_NOFOLLOW|O_DIRECTORY, the file
// with O_NOFOLLOW|O_NONBLOCK (a FIFO opens at once, to be refused by its
// type), then checks that the file is a regular one.
func openBelow(dir *os.File, rel string) (*os.File, error) {
	path := filepath.Join(dir.Name(), rel)
	parts := strings.Split(rel, "/")
	at, owned := int(dir.Fd()), false
	defer func() {
		if owned {
			unix.Close(at)
		}
	}()
	for _, part := range parts[:len(parts)-1] {
		fd, err := unix.Openat(at, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, linkError(path, err)
		}
		if owned {
			unix.Close(at)
		}
		at, owned = fd, true
	}
	fd, err := unix.Openat(at, parts[len(parts)-1], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, linkError(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathError(path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// linkError names path for an open that found a symbolic link (ELOOP
// with O_NOFOLLOW, or EMLINK on some systems) or something that is no
// directory where one should be (ENOTDIR).
func linkError(path string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, ErrLink)
	}
	return pathError(path, err)
}

//go:build unix

package execute

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nodepack/nodepack/runner/run"
	"golang.org/x/sys/unix"
)

// openDir opens the directory at path, which must not be a symbolic link.
func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, linkError(path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// mkdirIn makes the directory name in dir; its errors are the system's
// (fs.ErrExist, fs.ErrNotExist hold as for os.Mkdir).
func mkdirIn(dir *os.File, name string) error { return unix.Mkdirat(int(dir.Fd()), name, 0o755) }

// renameIn renames the entry old in dir to new (a link is renamed, not
// followed).
func renameIn(dir *os.File, old, new string) error {
	if err := unix.Renameat(int(dir.Fd()), old, int(dir.Fd()), new); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(dir.Name(), old), New: filepath.Join(dir.Name(), new), Err: err}
	}
	return nil
}

// statIn returns the size and modification time of name in dir, not
// following it if a symbolic link; ok is false when it is not there.
func statIn(dir *os.File, name string) (size int64, mtime time.Time, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, time.Time{}, false
	}
	return st.Size, time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), true
}

// openDirIn opens the directory name in dir, which must not be a
// symbolic link.
func openDirIn(dir *os.File, name string) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, linkError(path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openIn opens the file name in dir for writing, following no symbolic
// link: appended to (a log), or with truncate, written anew. Unless fresh
// (dir was just made by nodepack, so nobody else put a file there), what
// it opened must be a regular file with no other name (a hard link). It
// opens with openat(2) and os.NewFile rather than os.OpenFile, which
// would also try (and fail) to add a regular file to Go's poller: two
// system calls per log, per run, for nothing.
func openIn(dir *os.File, name string, truncate, fresh bool) (*os.File, error) {
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if truncate {
		flags |= unix.O_TRUNC
	} else {
		flags |= unix.O_APPEND
	}
	path := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, flags, 0o644)
	if err != nil {
		return nil, linkError(path, err)
	}
	if !fresh {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink > 1 {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: not a file of nodepack's own (another type, or a hard link): %w", path, run.ErrLink)
		}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// linkError names path for an open that found a symbolic link (ELOOP
// with O_NOFOLLOW) or something else where a directory should be.
func linkError(path string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, run.ErrLink)
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// roomLow reports whether the file system of dir has less than 64 MiB
// left for this user, or cannot say.
func roomLow(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return true
	}
	return uint64(st.Bavail)*uint64(st.Bsize) < 64<<20
}

// isDirIn reports whether name in dir is a directory itself: not a
// symbolic link to one.
func isDirIn(dir *os.File, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

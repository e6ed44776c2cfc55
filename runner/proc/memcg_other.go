//go:build !linux

package proc

import "errors"

// Memory cgroups are Linux's: elsewhere EnforceMem samples.

// Cgroups makes memory cgroups; there are none here.
type Cgroups struct{}

type cgroup struct{ limit uint64 }

// NewCgroups fails here.
func NewCgroups(parent string) (*Cgroups, error) {
	return nil, errors.New("memory cgroup: there are none on this system")
}

func (m *Cgroups) make(limit uint64) (*cgroup, error) { return nil, errors.ErrUnsupported }
func (g *cgroup) oomKills() uint64                    { return 0 }
func (g *cgroup) remove()                             {}

// Close does nothing here.
func (m *Cgroups) Close() {}

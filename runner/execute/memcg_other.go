//go:build !linux

package execute

import "errors"

// Memory cgroups are Linux's: elsewhere EnforceMem samples.

type memGroups struct{}

type memGroup struct{ limit uint64 }

func newMemGroups(parent string) (*memGroups, error) {
	return nil, errors.New("memory cgroup: there are none on this system")
}

func (m *memGroups) make(limit uint64) (*memGroup, error) { return nil, errors.ErrUnsupported }
func (g *memGroup) oomKills() uint64                      { return 0 }
func (g *memGroup) remove()                               {}
func (m *memGroups) close()                               {}

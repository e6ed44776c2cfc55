package resources

import (
	"reflect"
	"strings"
	"testing"
)

// fourGPUs: indices 0-3; GPU 2 is in MIG mode with two MIG devices.
var fourGPUs = []GPU{
	{Index: 0, UUID: "GPU-0aaa1111-0000-0000-0000-000000000000"},
	{Index: 1, UUID: "GPU-0aab2222-0000-0000-0000-000000000000"},
	{Index: 2, UUID: "GPU-2ccc3333-0000-0000-0000-000000000000", MIGEnabled: true, MIG: []MIG{
		{UUID: "MIG-11110000-0000-0000-0000-000000000000"},
		{UUID: "MIG-22220000-0000-0000-0000-000000000000"},
	}},
	{Index: 3, UUID: "GPU-3ddd4444-0000-0000-0000-000000000000"},
}

func uuids(gpus []GPU) []string {
	var ids []string
	for _, g := range gpus {
		if g.MIGEnabled {
			for _, m := range g.MIG {
				ids = append(ids, m.UUID)
			}
			continue
		}
		ids = append(ids, g.UUID)
	}
	return ids
}

func TestVisibleGPUs(t *testing.T) {
	tests := []struct {
		description  string
		value        string
		want         []string // unit UUIDs
		wantWarnings int
	}{
		{"indices", "3,0", []string{fourGPUs[0].UUID, fourGPUs[3].UUID}, 0},
		{"indices with spaces", " 1 , 3", []string{fourGPUs[1].UUID, fourGPUs[3].UUID}, 0},
		{"full UUID", fourGPUs[1].UUID, []string{fourGPUs[1].UUID}, 0},
		{"unique UUID prefix", "GPU-3ddd", []string{fourGPUs[3].UUID}, 0},
		{"ambiguous prefix stops the list", "3,GPU-0aa,1", []string{fourGPUs[3].UUID}, 1},
		{"MIG UUID keeps only that MIG device", "MIG-2222", []string{"MIG-22220000-0000-0000-0000-000000000000"}, 0},
		{"a MIG GPU by index keeps all its MIG devices", "2", uuids(fourGPUs[2:3]), 0},
		{"empty means no GPUs", "", nil, 0},
		{"invalid entry mid-list stops there, as CUDA does", "0,2,-1,1", append([]string{fourGPUs[0].UUID}, uuids(fourGPUs[2:3])...), 1},
		{"unknown index stops there", "1,9,3", []string{fourGPUs[1].UUID}, 1},
		{"unknown UUID", "GPU-ffff", nil, 1},
		{"duplicate is ignored", "1,1,3", []string{fourGPUs[1].UUID, fourGPUs[3].UUID}, 1},
		{"legacy MIG-GPU- form names no device", "MIG-GPU-2ccc3333/1/0", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, warnings := visibleGPUs(fourGPUs, tc.value)
			if ids := uuids(got); !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("VisibleGPUs(%q) = %v, want %v", tc.value, ids, tc.want)
			}
			if len(warnings) != tc.wantWarnings {
				t.Errorf("warnings %q, want %d", warnings, tc.wantWarnings)
			}
		})
	}
}

func TestSelectGPUs(t *testing.T) {
	node := Node{GPUs: fourGPUs, GPUSource: sourceNVML}
	tests := []struct {
		description string
		node        Node
		list        string
		want        []string
		wantErr     string // substring; "" means success
	}{
		{"none", node, "none", nil, ""},
		{"range of indices", node, "0-1", []string{fourGPUs[0].UUID, fourGPUs[1].UUID}, ""},
		{"UUID prefix and index", node, "GPU-3d,0", []string{fourGPUs[0].UUID, fourGPUs[3].UUID}, ""},
		{"bad entry is named", node, "0,x", nil, `entry "x"`},
		{"unknown index names the node's GPUs", node, "7", nil, "gpus 0-3"},
		{"descending range", node, "3-1", nil, `bad entry "3-1"`},
		{"empty entry", node, "0,,1", nil, "empty entry"},
		{"duplicate", node, "0,0", nil, "twice"},
		{"no driver: opaque ids", Node{}, "0,GPU-abc,MIG-def", []string{"0", "GPU-abc", "MIG-def"}, ""},
		{"no driver: malformed id", Node{}, "0,banana", nil, `bad entry "banana"`},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := tc.node.SelectGPUs(tc.list)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), `gpus "`) {
					t.Fatalf("SelectGPUs(%q) error = %v, want one containing %q", tc.list, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ids := uuids(got.GPUs); !reflect.DeepEqual(ids, tc.want) || got.GPUSource != sourceFlag {
				t.Errorf("SelectGPUs(%q) = %v from %q, want %v from flag", tc.list, ids, got.GPUSource, tc.want)
			}
		})
	}
}

func TestSelectCPUs(t *testing.T) {
	node := Node{
		CPUs: []CPU{{ID: 0}, {ID: 1, Core: 1}, {ID: 2, Core: 2}, {ID: 3, Core: 3}},
		GPUs: []GPU{{Index: 0, UUID: "GPU-a", CPUs: []int{0, 1, 2, 3}}},
	}
	got, err := node.SelectCPUs("1,3")
	if err != nil {
		t.Fatal(err)
	}
	if ids := got.CPUIDs(); !reflect.DeepEqual(ids, []int{1, 3}) || !reflect.DeepEqual(got.GPUs[0].CPUs, []int{1, 3}) {
		t.Errorf("cpus %v, gpu cpus %v; want [1 3] for both", ids, got.GPUs[0].CPUs)
	}
	if !reflect.DeepEqual(node.GPUs[0].CPUs, []int{0, 1, 2, 3}) {
		t.Errorf("SelectCPUs changed its receiver's GPUs")
	}
	for _, bad := range []struct{ list, want string }{
		{"0-2,x", `"x"`},
		{"5", "cpu 5 is not allowed here (allowed: 0-3)"},
		{"", "no cpus"},
	} {
		if _, err := node.SelectCPUs(bad.list); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.HasPrefix(err.Error(), "cpus") {
			t.Errorf("SelectCPUs(%q) error = %v, want one containing %q", bad.list, err, bad.want)
		}
	}
}

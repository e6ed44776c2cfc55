package pack

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		description string
		list        string
		want        []int
		wantErr     string
	}{
		{"empty", "", nil, ""},
		{"blank", " \n", nil, ""},
		{"one CPU", "5", []int{5}, ""},
		{"range", "0-3", []int{0, 1, 2, 3}, ""},
		{"range of one", "4-4", []int{4}, ""},
		{"Slurm cpuset", "2,3,7,9-12", []int{2, 3, 7, 9, 10, 11, 12}, ""},
		{"entries out of order", "8,0-1", []int{0, 1, 8}, ""},
		{"a line read from a cpuset file", "0-1,4\n", []int{0, 1, 4}, ""},
		{"spaces around entries", " 0 , 2-3 ", []int{0, 2, 3}, ""},
		{"leading zeros", "007", []int{7}, ""},
		{"highest id", "65535", []int{65535}, ""},
		{"not a number", "0-3,x", nil, `cpu list "0-3,x": bad entry "x"`},
		{"empty entry", "0,,1", nil, `cpu list "0,,1": bad entry ""`},
		{"trailing comma", "0,", nil, `cpu list "0,": bad entry ""`},
		{"negative", "-1", nil, `cpu list "-1": bad entry "-1"`},
		{"open range", "3-", nil, `cpu list "3-": bad entry "3-"`},
		{"sign", "+3", nil, `cpu list "+3": bad entry "+3"`},
		{"two dashes", "1-2-3", nil, `cpu list "1-2-3": bad entry "1-2-3"`},
		{"stride", "0-7:2", nil, `cpu list "0-7:2": bad entry "0-7:2"`},
		{"space inside an entry", "1 2", nil, `cpu list "1 2": bad entry "1 2"`},
		{"descending range", "3-1", nil, `cpu list "3-1": bad entry "3-1": descending range`},
		{"id too high", "0-70000", nil, `cpu list "0-70000": bad entry "0-70000": cpu above 65535`},
		{"id beyond int", "99999999999999999999", nil, `cpu list "99999999999999999999": bad entry "99999999999999999999": cpu above 65535`},
		{"duplicate", "0-3,2", nil, `cpu list "0-3,2": cpu 2 listed twice`},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ParseCPUList(tc.list)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("ParseCPUList(%q) = %v, %q; want %v, %q", tc.list, got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}

func TestFormatCPUList(t *testing.T) {
	tests := []struct {
		description string
		cpus        []int
		want        string
	}{
		{"nil", nil, ""},
		{"one CPU", []int{3}, "3"},
		{"two apart", []int{1, 3}, "1,3"},
		{"pair", []int{2, 3}, "2-3"},
		{"DGX half", append(ids(0, 31), ids(64, 95)...), "0-31,64-95"},
		{"unsorted with duplicates", []int{9, 2, 3, 2, 7, 10, 11, 12}, "2-3,7,9-12"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := FormatCPUList(tc.cpus); got != tc.want {
				t.Errorf("FormatCPUList(%v) = %q, want %q", tc.cpus, got, tc.want)
			}
		})
	}
}

// FuzzParseCPUList checks the round trip: whatever ParseCPUList accepts is
// ascending and in range, FormatCPUList writes it back in canonical form, and
// that form parses to the same CPUs. Errors always name the list.
func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"", "0", "0-3", "0-31,64-95", "2,3,7,9-12", " 1 , 2 ", "3-1", "0-3,x", "-1", "0,,1", "65535", "65536", "0-3,2", "0-7:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cpu list ") {
				t.Errorf("ParseCPUList(%q) error %q does not name the list", s, err)
			}
			return
		}
		for i, id := range cpus {
			if id < 0 || id > maxCPUID || i > 0 && id <= cpus[i-1] {
				t.Fatalf("ParseCPUList(%q) = %v: not strictly ascending in range", s, cpus)
			}
		}
		formatted := FormatCPUList(cpus)
		again, err := ParseCPUList(formatted)
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("ParseCPUList(FormatCPUList(%v)) = %v, %v; formatted %q", cpus, again, err, formatted)
		}
		if FormatCPUList(again) != formatted {
			t.Fatalf("FormatCPUList not canonical for %q", formatted)
		}
	})
}

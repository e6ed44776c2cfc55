package claim

import "strings"

// parseMountinfo splits a line of /proc/self/mountinfo into its mount
// point, its file system type and its options (the mount's, then the
// super block's).
func parseMountinfo(line string) (point, fstype, opts string, ok bool) {
	pre, post, found := strings.Cut(line, " - ")
	f, g := strings.Fields(pre), strings.Fields(post)
	if !found || len(f) < 6 || len(g) < 1 {
		return "", "", "", false
	}
	opts = f[5]
	if len(g) >= 3 {
		opts += "," + g[2]
	}
	return unescapeMount(f[4]), g[0], opts, true
}

// unescapeMount undoes mountinfo's octal escapes (a space is \040).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, ok := octal(s[i+1 : min(i+4, len(s))]); ok {
				b.WriteByte(n)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int(c-'0')
	}
	return byte(n), n < 256
}

// under reports whether path is point or below it.
func under(path, point string) bool {
	return path == point || point == "/" || strings.HasPrefix(path, point+"/")
}

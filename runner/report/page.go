package report

import _ "embed"

// pageHTML is the report's HTML: the data goes where /*DATA*/ is, the output
// directory's name where TITLE is. Everything it needs is inline; its
// Content-Security-Policy lets it load nothing. It reads the data as the
// document type says, and names a view in its address
// (#metric=loss:min&sort=lr:desc&filter=resnet).
//
//go:embed page.html
var pageHTML string

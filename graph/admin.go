package graph

import "errors"

// errNoBackoffice answers the admin mutations of a handler built without a
// back office (shown as an internal error, logged).
var errNoBackoffice = errors.New("graph: the admin mutations need Options.Backoffice")

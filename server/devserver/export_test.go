package devserver

import "maps"

// SetFileConnectAttributes replaces the SQLite connection attributes of
// servers started from now on, for the tuning benchmark's rollback-journal
// variant, and returns a function that restores them.
func SetFileConnectAttributes(attrs map[string]string) (restore func()) {
	saved := fileConnectAttributes
	fileConnectAttributes = maps.Clone(attrs)
	return func() { fileConnectAttributes = saved }
}

//go:build !unix

package devserver

// lockDataDir does nothing where flock is unavailable: keeping two servers
// off one data dir is then up to the user.
func lockDataDir(string) (func(), error) { return func() {}, nil }

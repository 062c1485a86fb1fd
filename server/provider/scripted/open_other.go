//go:build !unix

package scripted

// openNonBlock is 0 where the platform has no O_NONBLOCK; the stat before
// the open still refuses a file that is not regular.
const openNonBlock = 0

//go:build unix

package scripted

import "syscall"

// openNonBlock opens a script without waiting: opening a FIFO for reading
// would otherwise block until a writer appears. The file is checked to be
// regular before anything is read from it.
const openNonBlock = syscall.O_NONBLOCK

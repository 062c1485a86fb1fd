package store

// Content-defined chunking: a value is cut where a rolling hash of the
// last 64 bytes says so, not at fixed offsets, so two values that share a
// prefix (a transcript and the same transcript one run later) are cut the
// same way up to a chunk or two before they differ, and share every chunk
// before that. docs/performance.md ("Content-store growth") has the
// numbers.

// Chunk size bounds. They are part of the stored format only in that
// changing them changes where new values are cut (old ones still read):
// keep them, or lose sharing with what is stored already.
const (
	// MinChunk: no cut before this many bytes, so tiny chunks (and their
	// per-object cost) are rare.
	MinChunk = 512
	// MaxChunk: a cut is forced here, so no chunk is larger.
	MaxChunk = 64 << 10
	// chunkMask gives a cut about every 1 KiB past MinChunk, so chunks
	// average about 1.5 KiB. Small, because a run's new content reaches
	// the store in several payloads (the tool's result, the model turn's
	// input, the transcript, the session's state), each framing it
	// differently: each re-stores the chunk where its framing meets the
	// content and the chunk where the content ends, which at 6 KiB
	// chunks cost 0.6× the content and at 1.5 KiB 0.4×
	// (docs/performance.md, "Content-store growth"). The price is objects:
	// about 45 a run of 64 KiB.
	chunkMask = 1<<10 - 1
)

// gear maps each byte to a fixed pseudo-random 64-bit value (splitmix64
// from a fixed seed). It must never change: it decides where values are
// cut, hence which chunks are shared with those already stored.
var gear = func() (t [256]uint64) {
	x := uint64(0x6b65656c2f636463) // "keel/cdc"
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		t[i] = z ^ z>>31
	}
	return t
}()

// chunks cuts data into content-defined chunks of MinChunk..MaxChunk bytes
// (the last may be shorter). The chunks are sub-slices of data.
func chunks(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := cut(data)
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// cut returns the length of the first chunk of data.
func cut(data []byte) int {
	if len(data) <= MinChunk {
		return len(data)
	}
	end := min(len(data), MaxChunk)
	var h uint64
	for i := MinChunk - 64; i < end; i++ {
		h = h<<1 + gear[data[i]]
		if i >= MinChunk && h&chunkMask == 0 {
			return i + 1
		}
	}
	return end
}

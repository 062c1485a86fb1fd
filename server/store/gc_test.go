package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/claimcheck"
)

// later is a clock past every object's grace period.
func later() time.Time { return time.Now().Add(3 * time.Hour) }

// gcFixture stores, through one codec: a transcript (kept), a longer one
// that shares its prefix (dropped: no history names it any more, as after
// a rewind), an orphan, and a session state that names an event segment
// by key, as text.
type gcFixture struct {
	store                         *Store
	codec                         *Codec
	kept, dropped, orphan, state  *commonpb.Payload
	keptRef, droppedRef, stateRef *commonpb.Payload
	segment                       *commonpb.Payload
}

func newGCFixture(t *testing.T, s *Store, opts CodecOptions) *gcFixture {
	t.Helper()
	f := &gcFixture{store: s, codec: NewCodec(s, opts)}
	base := text(t, 256<<10)
	f.kept = &commonpb.Payload{Data: base}
	f.dropped = &commonpb.Payload{Data: append(append([]byte(nil), base...), text(t, 64<<10)...)}
	f.orphan = &commonpb.Payload{Data: text(t, 100<<10)}
	seg, err := f.codec.PutPayload(t.Context(), &commonpb.Payload{Data: []byte("one event segment")})
	require.NoError(t, err)
	f.segment = seg
	key, size, err := claimcheck.ParseReference(seg)
	require.NoError(t, err)
	state, err := converter.GetDefaultDataConverter().ToPayload(map[string]any{
		"segments": []map[string]any{{"key": key, "size": size}}, "pad": string(text(t, 8<<10))})
	require.NoError(t, err)
	f.state = state
	refs, err := f.codec.Encode([]*commonpb.Payload{f.kept, f.dropped, f.orphan, f.state})
	require.NoError(t, err)
	for _, r := range refs {
		require.True(t, claimcheck.IsReference(r))
	}
	f.keptRef, f.droppedRef, f.stateRef = refs[0], refs[1], refs[3]
	return f
}

// requireReads checks that every reference still decodes to its value.
func (f *gcFixture) requireReads(t *testing.T) {
	t.Helper()
	dec, err := f.codec.Decode([]*commonpb.Payload{f.keptRef, f.stateRef, f.segment})
	require.NoError(t, err)
	require.True(t, proto.Equal(f.kept, dec[0]), "the kept transcript reads")
	require.True(t, proto.Equal(f.state, dec[1]), "the state reads")
	require.Equal(t, "one event segment", string(dec[2].GetData()), "the segment the state names reads")
}

func collect(t *testing.T, s *Store, opts CollectOptions, roots ...*commonpb.Payload) CollectStats {
	t.Helper()
	c, err := s.NewCollector(opts)
	require.NoError(t, err)
	for _, r := range roots {
		require.NoError(t, c.Mark(t.Context(), r))
	}
	stats, err := c.Sweep(t.Context(), nil)
	require.NoError(t, err)
	return stats
}

func TestCollectDeletesOnlyTheUnreferenced(t *testing.T) {
	s := open(t, "mem://")
	f := newGCFixture(t, s, CodecOptions{})
	objects, size := storeBytes(t, s)
	// An inline payload that names a key as text keeps it too.
	inline := &commonpb.Payload{Data: []byte(`{"note":"nothing here"}`)}

	dry := collect(t, s, CollectOptions{Now: later, DryRun: true}, f.keptRef, f.stateRef, inline)
	require.Equal(t, objects, dry.Listed)
	require.Equal(t, size, dry.ListedBytes)
	require.Positive(t, dry.Deleted)
	n, _ := storeBytes(t, s)
	require.Equal(t, objects, n, "a dry run deletes nothing")

	// Within the grace period nothing goes.
	young := collect(t, s, CollectOptions{}, f.keptRef, f.stateRef)
	require.Zero(t, young.Deleted)
	require.Equal(t, objects-young.Kept, young.Young)

	stats := collect(t, s, CollectOptions{Now: later}, f.keptRef, f.stateRef, inline)
	require.Equal(t, dry.Deleted, stats.Deleted)
	require.Equal(t, dry.DeletedBytes, stats.DeletedBytes)
	require.Equal(t, objects, stats.Kept+stats.Deleted)
	n, left := storeBytes(t, s)
	require.Equal(t, objects-stats.Deleted, n)
	require.Equal(t, size-stats.DeletedBytes, left)
	f.requireReads(t)
	// The dropped transcript lost its own chunks and tree, not the ones
	// it shared with the kept one; the orphan is gone.
	_, err := f.codec.Decode([]*commonpb.Payload{f.droppedRef})
	require.ErrorIs(t, err, ErrNotFound)
	require.Less(t, stats.DeletedBytes, int64(proto.Size(f.dropped)+proto.Size(f.orphan)),
		"shared chunks are not deleted")
	require.Greater(t, stats.DeletedBytes, int64(proto.Size(f.orphan)))

	// A second collection finds nothing more.
	again := collect(t, s, CollectOptions{Now: later}, f.keptRef, f.stateRef)
	require.Zero(t, again.Deleted)
}

// References written before chunking keep their one object.
func TestCollectKeepsWholeObjects(t *testing.T) {
	s := open(t, "mem://")
	f := newGCFixture(t, s, CodecOptions{WholeObjects: true})
	stats := collect(t, s, CollectOptions{Now: later}, f.keptRef, f.stateRef)
	require.Equal(t, 2, stats.Deleted, "the dropped transcript and the orphan")
	f.requireReads(t)
}

func TestCollectEncrypted(t *testing.T) {
	s := open(t, "mem://")
	keys := testKeys(t, "k1")
	f := newGCFixture(t, s, CodecOptions{Encryption: keys})
	c, err := s.NewCollector(CollectOptions{Now: later})
	require.NoError(t, err)
	require.ErrorIs(t, c.Mark(t.Context(), f.stateRef), ErrSealed, "without the key the state's keys cannot be seen")
	_, err = c.Sweep(t.Context(), nil)
	require.ErrorIs(t, err, ErrIncomplete)
	n, _ := storeBytes(t, s)
	require.Positive(t, n)

	collect(t, s, CollectOptions{Now: later, Decrypt: keys}, f.keptRef, f.stateRef)
	f.requireReads(t)
}

func TestCollectGrace(t *testing.T) {
	_, err := open(t, "mem://").NewCollector(CollectOptions{Grace: time.Minute})
	require.ErrorIs(t, err, ErrGrace)
}

// An old object that a new value uses again is written again (Put), so
// a collection that has not seen the new reference yet keeps it.
func TestCollectKeepsWhatAWriterReuses(t *testing.T) {
	dir := t.TempDir()
	old := open(t, "file://"+dir)
	f := newGCFixture(t, old, CodecOptions{})
	past := time.Now().Add(-2 * time.Hour)
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(path, past, past)
	}))
	// A collection starts; nothing it will be shown names the orphan.
	s := open(t, "file://"+dir)
	c, err := s.NewCollector(CollectOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Mark(t.Context(), f.keptRef))
	// Meanwhile a writer stores the orphan again, in another process.
	w := NewCodec(open(t, "file://"+dir), CodecOptions{})
	ref, err := w.Encode([]*commonpb.Payload{f.orphan})
	require.NoError(t, err)
	_, err = c.Sweep(t.Context(), nil)
	require.NoError(t, err)
	dec, err := w.Decode(ref)
	require.NoError(t, err)
	require.True(t, proto.Equal(f.orphan, dec[0]))
}

// A collection stopped midway (cancelled here; killed in server/cmd/keel's test)
// has deleted only what nothing references: everything still reads, and
// the next collection finishes the job.
func TestCollectInterrupted(t *testing.T) {
	s := open(t, "mem://")
	f := newGCFixture(t, s, CodecOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	c, err := s.NewCollector(CollectOptions{Now: later})
	require.NoError(t, err)
	require.NoError(t, c.Mark(ctx, f.keptRef))
	require.NoError(t, c.Mark(ctx, f.stateRef))
	deletes := 0
	c.beforeDelete = func() {
		if deletes++; deletes == 3 {
			cancel()
		}
	}
	stats, err := c.Sweep(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2, stats.Deleted, "stopped at the third delete")
	f.requireReads(t)
	rest := collect(t, s, CollectOptions{Now: later}, f.keptRef, f.stateRef)
	require.Positive(t, rest.Deleted)
	f.requireReads(t)
}

package upstream_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"runtime"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// messages returns a zero value of every type the codec encodes: each
// struct of proto.go and the error frame's payload.
func messages() []any {
	return []any{
		&upstream.Header{}, &upstream.Caller{}, &upstream.Attr{}, &upstream.Entry{},
		&upstream.HelloReq{}, &upstream.HelloResp{}, &upstream.Empty{}, &upstream.NodeReq{},
		&upstream.LookupReq{}, &upstream.ForgetReq{}, &upstream.ForgetItem{},
		&upstream.SetattrReq{}, &upstream.AttrResp{}, &upstream.ReadlinkResp{},
		&upstream.MknodReq{}, &upstream.SymlinkReq{}, &upstream.LinkReq{},
		&upstream.EntryResp{}, &upstream.UnlinkReq{}, &upstream.RenameReq{},
		&upstream.OpenReq{}, &upstream.OpenResp{}, &upstream.CreateReq{},
		&upstream.CreateResp{}, &upstream.ReadReq{}, &upstream.ReadNodeReq{}, &upstream.DataResp{},
		&upstream.ReadNodesReq{}, &upstream.ReadNodesResp{}, &upstream.NodeData{},
		&upstream.WriteReq{}, &upstream.WriteResp{}, &upstream.HandleReq{},
		&upstream.FsyncReq{}, &upstream.ReaddirReq{}, &upstream.Dirent{},
		&upstream.ReaddirResp{}, &upstream.StatfsResp{}, &upstream.XattrReq{},
		&upstream.XattrResp{}, &upstream.SetxattrReq{}, &upstream.FallocateReq{},
		&upstream.LseekReq{}, &upstream.LseekResp{}, &upstream.Lock{},
		&upstream.LockReq{}, &upstream.LockResp{}, &upstream.AccessReq{},
		&upstream.EventBatch{}, &upstream.Event{}, &upstream.ErrorMsg{},
		&upstream.ChangedResp{}, &upstream.TreeReq{}, &upstream.TreeDir{},
		&upstream.TreeResp{}, &upstream.WatchReq{}, &upstream.AckReq{},
		&upstream.ApplyReq{}, &upstream.WBOp{}, &upstream.ApplyResp{},
		&upstream.ChallengeResp{}, &upstream.AuthReq{}, &upstream.CancelReq{},
	}
}

func typeName(m any) string { return reflect.TypeOf(m).Elem().Name() }

// TestMessagesComplete keeps messages in step with proto.go.
func TestMessagesComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "proto.go", nil, 0)
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	have := map[string]bool{}
	for _, m := range messages() {
		have[typeName(m)] = true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if _, isStruct := ts.Type.(*ast.StructType); isStruct && !have[ts.Name.Name] {
				t.Errorf("proto.go struct %s is missing from messages()", ts.Name.Name)
			}
		}
		return true
	})
}

// fill sets every field of v to a distinct nonzero value; slices other
// than []byte get two elements, so nested slices are exercised.
func fill(v reflect.Value, n *uint64) {
	*n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(*n*0x0101010101010101 + 0x8000)
		v.SetUint(v.Uint() | 1)
	case reflect.Int32, reflect.Int64:
		v.SetInt(-int64(*n) * 1000003)
	case reflect.String:
		v.SetString(fmt.Sprintf("name-%d", *n))
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte{byte(*n), 0, 0xff})
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	}
}

func filled(m any) any {
	v := reflect.New(reflect.TypeOf(m).Elem())
	var n uint64
	fill(v.Elem(), &n)
	return v.Interface()
}

func fresh(m any) any { return reflect.New(reflect.TypeOf(m).Elem()).Interface() }

func TestCodecRoundTrip(t *testing.T) {
	for _, m := range messages() {
		t.Run(typeName(m), func(t *testing.T) {
			want := filled(m)
			b := upstream.Marshal(nil, want)
			got := fresh(m)
			if err := upstream.Unmarshal(b, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip: got %+v, want %+v", got, want)
			}
			if again := upstream.Marshal(nil, got); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
			}
		})
	}
}

// TestCodecZeroValues round-trips zero values, whose slices are empty.
func TestCodecZeroValues(t *testing.T) {
	for _, m := range messages() {
		b := upstream.Marshal(nil, m)
		got := fresh(m)
		if err := upstream.Unmarshal(b, got); err != nil {
			t.Errorf("%s: Unmarshal: %v", typeName(m), err)
			continue
		}
		if again := upstream.Marshal(nil, got); !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoding got %x, want %x", typeName(m), again, b)
		}
	}
}

func TestCodecTruncatedAndTrailing(t *testing.T) {
	for _, m := range messages() {
		b := upstream.Marshal(nil, filled(m))
		for i := 0; i < len(b); i++ {
			if err := upstream.Unmarshal(b[:i], fresh(m)); !errors.Is(err, upstream.ErrMalformed) {
				t.Errorf("%s truncated to %d of %d bytes: got %v, want ErrMalformed", typeName(m), i, len(b), err)
			}
		}
		if err := upstream.Unmarshal(append(b, 0), fresh(m)); !errors.Is(err, upstream.ErrMalformed) {
			t.Errorf("%s with a trailing byte: got %v, want ErrMalformed", typeName(m), err)
		}
	}
}

// TestCodecLayout pins the encoding down: little-endian integers, bools
// as one byte, uint32 lengths and counts, nested structs inline.
func TestCodecLayout(t *testing.T) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		msg  any
		want []byte
	}{
		{&upstream.Empty{}, nil},
		{&upstream.LookupReq{Parent: 0x0102030405060708, Name: "ab"},
			cat(le64(0x0102030405060708), le32(2), []byte("ab"))},
		{&upstream.FsyncReq{Handle: 7, Datasync: true}, cat(le64(7), []byte{1})},
		{&upstream.LseekReq{Handle: 1, Offset: -2, Whence: 3}, cat(le64(1), le64(^uint64(1)), le32(3))},
		{&upstream.ForgetReq{Items: []upstream.ForgetItem{{Node: 5, Count: 6}}},
			cat(le32(1), le64(5), le64(6))},
		{&upstream.DataResp{Data: []byte{9, 8}}, cat(le32(2), []byte{9, 8})},
		{&upstream.Event{Kind: upstream.EvEntry, Op: 4, Node: 1, Parent: 2, Name: "x", IsDir: true, Cookie: 5},
			cat([]byte{2, 4}, le64(1), le64(2), le32(1), []byte("x"), []byte{1}, le32(5))},
	}
	for _, tt := range tests {
		if got := upstream.Marshal(nil, tt.msg); !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got %x, want %x", typeName(tt.msg), got, tt.want)
		}
	}
	if got := len(upstream.Marshal(nil, &upstream.Header{})); got != upstream.HeaderSize {
		t.Errorf("Header encodes to %d bytes, want HeaderSize %d", got, upstream.HeaderSize)
	}
}

func TestCodecRejects(t *testing.T) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	tests := []struct {
		name string
		msg  any
		data []byte
	}{
		{"bool 2", &upstream.FsyncReq{}, append(make([]byte, 8), 2)},
		{"string longer than payload", &upstream.ReadlinkResp{}, le32(0xffffffff)},
		{"bytes longer than payload", &upstream.DataResp{}, append(le32(0x7fffffff), 1, 2, 3)},
		{"count beyond payload", &upstream.ForgetReq{}, append(le32(0xffffffff), make([]byte, 64)...)},
		{"count of empty elements", &upstream.ReaddirResp{}, append(le32(1000), make([]byte, 999)...)},
		{"length prefix cut", &upstream.LookupReq{}, make([]byte, 10)},
	}
	for _, tt := range tests {
		if err := upstream.Unmarshal(tt.data, tt.msg); !errors.Is(err, upstream.ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", tt.name, err)
		}
	}
}

// TestCodecBoundsAllocation feeds counts that claim as many elements as
// there are bytes left: the decoder must not allocate far beyond the
// payload before finding out the elements do not fit.
func TestCodecBoundsAllocation(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		msg    any
		prefix int // bytes before the count
	}{{&upstream.ForgetReq{}, 0}, {&upstream.ReaddirResp{}, 0}, {&upstream.EventBatch{}, 16}, {&upstream.TreeResp{}, 0}}
	for _, tt := range tests {
		m := tt.msg
		payload := binary.LittleEndian.AppendUint32(make([]byte, tt.prefix), size)
		payload = append(payload, make([]byte, size)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := upstream.Unmarshal(payload, fresh(m))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, upstream.ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", typeName(m), err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 2*size {
			t.Errorf("%s: decoding %d bytes allocated %d bytes", typeName(m), len(payload), n)
		}
	}
}

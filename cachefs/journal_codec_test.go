package cachefs

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cachefs/cachefs/upstream"
)

// fullOp sets every field of a WBOp but Data to something not zero, by
// reflection, so that a field added later and not journaled fails the
// round trip.
func fullOp(t *testing.T, path string) upstream.WBOp {
	t.Helper()
	var op upstream.WBOp
	v := reflect.ValueOf(&op).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(path + "/" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(200 + i))
		case reflect.Int64:
			f.SetInt(-1 << 40)
		case reflect.Slice:
			if v.Type().Field(i).Name != "Data" {
				t.Fatalf("WBOp.%s: a slice the journal does not know", v.Type().Field(i).Name)
			}
		default:
			t.Fatalf("WBOp.%s: a %s the journal does not know", v.Type().Field(i).Name, f.Kind())
		}
	}
	return op
}

func TestJournalCodecRoundTrip(t *testing.T) {
	for _, path := range []string{"plain/ünï", "caf\xe9", "\x80", "q\"\\\x01\x7f\u2028", ""} {
		for _, r := range []*record{
			{Seq: 9, Op: fullOp(t, path), Staging: "data/" + path},
			{Seq: 1, Op: upstream.WBOp{Kind: upstream.WBMkdir, Path: path}},
			{Done: 1 << 60},
		} {
			line := appendRecord(nil, r)
			if !json.Valid(line) {
				t.Errorf("%q: not JSON: %s", path, line)
			}
			got, err := decodeRecord(line)
			if err != nil {
				t.Fatalf("decodeRecord(%s): %v", line, err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Errorf("round trip of %+v\n through %s\n gave %+v", r, line, got)
			}
		}
	}
}

// Journals written by encoding/json, before appendRecord, read the same.
func TestJournalCodecReadsOldLines(t *testing.T) {
	for _, r := range []*record{{Seq: 3, Op: fullOp(t, "a/b"), Staging: "data/1"}, {Done: 4}} {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord(line)
		if err != nil {
			t.Fatalf("decodeRecord(%s): %v", line, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%s read as %+v, want %+v", line, got, r)
		}
	}
}

func BenchmarkJournalLine(b *testing.B) {
	r := &record{Seq: 123456, Op: upstream.WBOp{Kind: upstream.WBSetattr, Path: "linux-6.1/drivers/net/ethernet/intel/e1000e/netdev.c",
		Mode: 0o100644, Uid: 1000, Gid: 1000, Valid: 0x3f, Atime: 1700000000123456789, Mtime: 1700000000123456789}}
	b.Run("appendRecord", func(b *testing.B) {
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = appendRecord(buf[:0], r)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			json.Marshal(r)
		}
	})
}

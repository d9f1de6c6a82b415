package cachefs

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/cachefs/cachefs/upstream"
)

// Journal lines. A record is one line of JSON, written by appendRecord
// and read by decodeRecord:
//
//	{"Seq":7,"Op":{"Kind":2,"Path":"d/f","Mode":33188},"Staging":"data/3"}
//	{"Done":7}
//
// Zero fields are left out. Names are bytes, not text: a string that is
// not valid UTF-8 (a Latin-1 file name) is written as {"b64":"..."},
// its bytes in standard base64, since a JSON string would carry it
// only with its invalid bytes replaced, and a replay would then make
// another name. Lines written by encoding/json (before this encoder)
// read the same.
//
// appendRecord is hand-written: it runs once per change on the request
// path, where json.Marshal's reflection was half the journal's cost.

// appendRecord appends r's journal line, without its newline, to b.
func appendRecord(b []byte, r *record) []byte {
	if r.Done != 0 {
		return append(strconv.AppendUint(append(b, `{"Done":`...), r.Done, 10), '}')
	}
	b = strconv.AppendUint(append(b, `{"Seq":`...), r.Seq, 10)
	b = appendOp(append(b, `,"Op":{`...), &r.Op)
	b = append(b, '}')
	if r.Staging != "" {
		b = appendString(append(b, `,"Staging":`...), r.Staging)
	}
	return append(b, '}')
}

// appendOp appends op's fields but Data (never journaled), zero ones
// left out.
func appendOp(b []byte, op *upstream.WBOp) []byte {
	start := len(b)
	field := func(name string) {
		if len(b) > start {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), name...), `":`...)
	}
	num := func(name string, v uint64) {
		if v != 0 {
			field(name)
			b = strconv.AppendUint(b, v, 10)
		}
	}
	signed := func(name string, v int64) {
		if v != 0 {
			field(name)
			b = strconv.AppendInt(b, v, 10)
		}
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			b = appendString(b, v)
		}
	}
	num("Kind", uint64(op.Kind))
	str("Path", op.Path)
	str("Path2", op.Path2)
	str("Target", op.Target)
	num("Mode", uint64(op.Mode))
	num("Uid", uint64(op.Uid))
	num("Gid", uint64(op.Gid))
	num("Valid", uint64(op.Valid))
	num("Flags", uint64(op.Flags))
	if op.First {
		field("First")
		b = append(b, "true"...)
	}
	num("Size", op.Size)
	signed("Offset", op.Offset)
	signed("Atime", op.Atime)
	signed("Mtime", op.Mtime)
	return b
}

// appendString appends s as a JSON string, or, if s is not valid UTF-8,
// as {"b64":"..."}.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		b = append(b, `{"b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, []byte(s))
		return append(b, `"}`...)
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// jstr is a journaled string: a JSON string, or {"b64":"..."} for one
// that is not UTF-8.
type jstr string

func (s *jstr) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var v struct {
			B64 []byte `json:"b64"`
		}
		err := json.Unmarshal(b, &v)
		*s = jstr(v.B64)
		return err
	}
	return json.Unmarshal(b, (*string)(s))
}

// journalLine is a record as read back.
type journalLine struct {
	Done, Seq uint64
	Op        struct {
		Kind                         uint8
		Path, Path2, Target          jstr
		Mode, Uid, Gid, Valid, Flags uint32
		First                        bool
		Size                         uint64
		Offset, Atime, Mtime         int64
	}
	Staging jstr
}

// decodeRecord reads a journal line.
func decodeRecord(line []byte) (*record, error) {
	var l journalLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	o := &l.Op
	return &record{Done: l.Done, Seq: l.Seq, Staging: string(l.Staging), Op: upstream.WBOp{
		Kind: o.Kind, Path: string(o.Path), Path2: string(o.Path2), Target: string(o.Target),
		Mode: o.Mode, Uid: o.Uid, Gid: o.Gid, Valid: o.Valid, Flags: o.Flags, First: o.First,
		Size: o.Size, Offset: o.Offset, Atime: o.Atime, Mtime: o.Mtime}}, nil
}

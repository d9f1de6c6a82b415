package upstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
)

// The codec encodes the message structs of proto.go field by field,
// little-endian: fixed-size integers and bools as themselves, strings and
// byte slices as a uint32 length and the bytes, other slices as a uint32
// count and the elements, nested structs inline. Lengths are checked
// against the bytes remaining, so no input makes the decoder allocate
// more than the frame holds.

// ErrMalformed reports a payload that does not decode.
var ErrMalformed = errors.New("cachefs: malformed message")

// Marshal appends the encoding of the struct pointed to by v to b.
func Marshal(b []byte, v any) []byte {
	return encodeValue(b, reflect.ValueOf(v).Elem())
}

// Unmarshal decodes data into the struct pointed to by v. Trailing bytes
// are an error.
func Unmarshal(data []byte, v any) error {
	d := decoder{buf: data}
	d.value(reflect.ValueOf(v).Elem())
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.buf))
	}
	return d.err
}

var bytesType = reflect.TypeOf([]byte(nil))

func encodeValue(b []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case reflect.Uint8:
		return append(b, uint8(v.Uint()))
	case reflect.Uint16:
		return binary.LittleEndian.AppendUint16(b, uint16(v.Uint()))
	case reflect.Uint32:
		return binary.LittleEndian.AppendUint32(b, uint32(v.Uint()))
	case reflect.Int32:
		return binary.LittleEndian.AppendUint32(b, uint32(v.Int()))
	case reflect.Uint64:
		return binary.LittleEndian.AppendUint64(b, v.Uint())
	case reflect.Int64:
		return binary.LittleEndian.AppendUint64(b, uint64(v.Int()))
	case reflect.String:
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Len()))
		return append(b, v.String()...)
	case reflect.Slice:
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Len()))
		if v.Type() == bytesType {
			return append(b, v.Bytes()...)
		}
		for i := 0; i < v.Len(); i++ {
			b = encodeValue(b, v.Index(i))
		}
		return b
	case reflect.Struct:
		for _, i := range exportedFields(v.Type()) {
			b = encodeValue(b, v.Field(i))
		}
		return b
	}
	panic("cachefs: codec cannot encode " + v.Type().String())
}

var fieldCache sync.Map // reflect.Type -> []int

func exportedFields(t reflect.Type) []int {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]int)
	}
	var idx []int
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			idx = append(idx, i)
		}
	}
	fieldCache.Store(t, idx)
	return idx
}

type decoder struct {
	buf []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf) {
		d.err = fmt.Errorf("%w: need %d bytes, have %d", ErrMalformed, n, len(d.buf))
		return nil
	}
	p := d.buf[:n]
	d.buf = d.buf[n:]
	return p
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) value(v reflect.Value) {
	if d.err != nil {
		return
	}
	switch v.Kind() {
	case reflect.Bool, reflect.Uint8:
		p := d.take(1)
		if p == nil {
			return
		}
		if v.Kind() == reflect.Bool {
			if p[0] > 1 {
				d.err = fmt.Errorf("%w: bool %d", ErrMalformed, p[0])
			}
			v.SetBool(p[0] == 1)
			return
		}
		v.SetUint(uint64(p[0]))
	case reflect.Uint16:
		if p := d.take(2); p != nil {
			v.SetUint(uint64(binary.LittleEndian.Uint16(p)))
		}
	case reflect.Uint32:
		v.SetUint(uint64(d.u32()))
	case reflect.Int32:
		v.SetInt(int64(int32(d.u32())))
	case reflect.Uint64:
		v.SetUint(d.u64())
	case reflect.Int64:
		v.SetInt(int64(d.u64()))
	case reflect.String:
		v.SetString(string(d.take(int(d.u32()))))
	case reflect.Slice:
		d.slice(v)
	case reflect.Struct:
		for _, i := range exportedFields(v.Type()) {
			d.value(v.Field(i))
		}
	default:
		d.err = fmt.Errorf("%w: cannot decode %s", ErrMalformed, v.Type())
	}
}

func (d *decoder) slice(v reflect.Value) {
	n := d.u32()
	if d.err != nil {
		return
	}
	if v.Type() == bytesType {
		if p := d.take(int(n)); p != nil {
			v.SetBytes(append([]byte(nil), p...))
		}
		return
	}
	// Each element takes at least minSize bytes, so a larger count is
	// malformed; this bounds the allocation below by the payload's size
	// times the ratio of an element's memory to its encoding.
	if uint64(n)*uint64(minSize(v.Type().Elem())) > uint64(len(d.buf)) || n > math.MaxInt32 {
		d.err = fmt.Errorf("%w: %d elements in %d bytes", ErrMalformed, n, len(d.buf))
		return
	}
	s := reflect.MakeSlice(v.Type(), int(n), int(n))
	for i := 0; i < int(n) && d.err == nil; i++ {
		d.value(s.Index(i))
	}
	v.Set(s)
}

// minSize is the fewest bytes that encode a value of type t, at least 1.
func minSize(t reflect.Type) int {
	switch t.Kind() {
	case reflect.Bool, reflect.Uint8:
		return 1
	case reflect.Uint16:
		return 2
	case reflect.Uint32, reflect.Int32, reflect.String, reflect.Slice:
		return 4
	case reflect.Uint64, reflect.Int64:
		return 8
	case reflect.Struct:
		n := 0
		for _, i := range exportedFields(t) {
			n += minSize(t.Field(i).Type)
		}
		return max(n, 1)
	}
	return 1
}

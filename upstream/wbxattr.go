package upstream

import (
	"encoding/binary"
	"syscall"
)

// Xattr is one extended attribute, as a WBXattrs op carries it.
type Xattr struct {
	Name  string
	Value []byte
}

// EncodeXattrs encodes xattrs as WBXattrs's Data: for each, the name's
// length, the name, the value's length and the value, lengths as
// uvarints.
func EncodeXattrs(xs []Xattr) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.AppendUvarint(b, uint64(len(x.Name)))
		b = append(b, x.Name...)
		b = binary.AppendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	return b
}

// DecodeXattrs reverses EncodeXattrs; EINVAL for a malformed list.
func DecodeXattrs(b []byte) ([]Xattr, error) {
	var xs []Xattr
	for len(b) > 0 {
		name, rest, err := cutField(b)
		if err != nil {
			return nil, err
		}
		value, rest, err := cutField(rest)
		if err != nil {
			return nil, err
		}
		xs = append(xs, Xattr{Name: string(name), Value: value})
		b = rest
	}
	return xs, nil
}

// cutField splits a uvarint length and that many bytes off b.
func cutField(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, syscall.EINVAL
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

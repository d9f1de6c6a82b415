package invalidation

// Op is what happened to a directory entry on the host.
type Op uint8

const (
	Create   Op = iota + 1 // Name appeared in Dir
	Delete                 // Name left Dir
	Modify                 // Name's content changed
	Attrib                 // Name's attributes changed
	MoveFrom               // Name left Dir by a rename (Cookie pairs it)
	MoveTo                 // Name entered Dir by a rename
	Overflow               // anything under Dir may have changed
)

// Change is one host filesystem event, before it is mapped to node ids.
type Change struct {
	Op      Op
	DirDev  uint64
	DirIno  uint64
	Name    string
	IsDir   bool
	Cookie  uint32
	RootDev uint64 // Overflow: the watched root affected
	RootIno uint64
}

package consistency

import "testing"

func TestModeFor(t *testing.T) {
	p := NewPolicy(Default)
	p.Register("/a", Delegated)
	p.Register("a/b", Cached)
	p.Register("a/b/c", Consistent)
	p.Register("x/", Cached)
	p.Register("a/b", Delegated)
	cases := []struct {
		path string
		want Mode
	}{
		{"", Consistent},        // default behaves as consistent
		{"q", Consistent},       // unregistered
		{"a", Delegated},        // only a delegated registration covers it
		{"a/z", Delegated},      // inherited
		{"a/b", Cached},         // cached beats delegated
		{"a/b/q/r", Cached},     // inherited from the stronger
		{"a/b/c/d", Consistent}, // strongest
		{"ab", Consistent},      // not under a
		{"x", Cached},
	}
	for _, c := range cases {
		if got := p.ModeFor(c.path); got != c.want {
			t.Errorf("ModeFor(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestDefaultPolicyMode(t *testing.T) {
	p := NewPolicy(Cached)
	if got := p.ModeFor("any/where"); got != Cached {
		t.Errorf("unregistered path under a cached default: %v, want cached", got)
	}
	p.Register("any", Delegated)
	if got := p.ModeFor("any/where"); got != Delegated {
		t.Errorf("a registration overrides the default: got %v, want delegated", got)
	}
}

func TestRegistrationsAreCounted(t *testing.T) {
	p := NewPolicy(Default)
	g0 := p.Generation()
	id1 := p.Register("src", Cached)
	id2 := p.Register("/src/", Cached)
	if id1 != id2 {
		t.Fatalf("same path and mode registered twice: ids %d and %d, want one shared", id1, id2)
	}
	if p.Generation() == g0 {
		t.Error("generation unchanged by Register")
	}
	if r, gone, ok := p.Unregister(id1); !ok || gone || r.Refs != 1 {
		t.Fatalf("first Unregister: %+v gone=%v ok=%v, want one reference left", r, gone, ok)
	}
	if p.ModeFor("src/x") != Cached {
		t.Error("registration lost while still referenced")
	}
	if _, gone, ok := p.Unregister(id1); !ok || !gone {
		t.Fatalf("second Unregister: gone=%v ok=%v, want gone", gone, ok)
	}
	if p.ModeFor("src/x") != Consistent {
		t.Error("mode kept after the last unregister")
	}
	if _, _, ok := p.Unregister(id1); ok {
		t.Error("Unregister of an unknown id succeeded")
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Default, Delegated, Cached, Consistent} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("fast"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}

func TestPredicates(t *testing.T) {
	if Consistent.MayCacheAttrs() || Consistent.MayCacheData() || Consistent.MayCacheEntries() || Default.MayCacheAttrs() {
		t.Error("consistent or default may cache")
	}
	if !Cached.MayCacheAttrs() || !Cached.MayCacheData() || Cached.WritesBack() {
		t.Error("cached: want caching without write-back")
	}
	if !Delegated.WritesBack() {
		t.Error("delegated must write back")
	}
}

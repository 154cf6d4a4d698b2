package docker

import (
	"errors"

	cerrdefs "github.com/containerd/errdefs"
)

// The names of this instance's containers as this runtime knows them, so
// that a new conversation's first command does not ask the engine whether
// its container exists (one API round trip on the warm path). Known only
// after a Reconcile listed them; from then on every create, rename and
// removal of this runtime updates the set. Something else creating a
// container with one of our names (another conch process on the same data
// dir, an operator) is caught by the engine: the create or rename fails
// with a conflict and the caller asks the engine after all.

// mayExist reports whether a container named name may exist: true unless
// the set is known and lacks it.
func (r *Runtime) mayExist(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names == nil || r.names[name]
}

// setNames makes the set known with the names a listing found.
func (r *Runtime) setNames(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = map[string]bool{}
	for _, n := range names {
		r.names[n] = true
	}
}

// noteName records that a container named name exists (exists) or not.
func (r *Runtime) noteName(name string, exists bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil || name == "" {
		return
	}
	if exists {
		r.names[name] = true
	} else {
		delete(r.names, name)
	}
}

// errNameTaken: a create or rename found the name in use although the set
// said it was free.
var errNameTaken = errors.New("container name already in use")

func nameConflict(err error) bool {
	return err != nil && (cerrdefs.IsConflict(err) || errors.Is(err, errNameTaken))
}

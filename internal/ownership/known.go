package ownership

import "lifeboat.dev/lifeboat/internal/cloud"

// Known takes EC2's answer about instances the caller has just read (the instances of a
// capacity reservation): for CacheTTL their ownership is decided from it, without asking EC2
// again. An instance whose lookup is in flight keeps that lookup's answer.
func (r *Resolver) Known(instances []cloud.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for _, in := range instances {
		if _, busy := r.inflight[in.ID]; in.ID == "" || busy {
			continue
		}
		r.answers[in.ID] = answer{inst: in, found: true, at: now}
	}
}

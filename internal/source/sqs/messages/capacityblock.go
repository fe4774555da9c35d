// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

// A Capacity Block (capacity reserved for a while, GPU instances for ML work) ends on its
// end date. Forty minutes before, EC2 sends a "Capacity Block Expiration Warning" naming the
// reservation, not its instances; ten minutes after the warning (thirty before the end) EC2
// begins to terminate the instances still running in it.
//
// AWS documents the detail-type in two spellings, and both are accepted. Its example also
// writes the envelope's keys as detail_type and customer_event_id; those are read as well
// (readEnvelope): refusing them could only lose a real warning.
//
// The warning is not trusted as sent: the controller reads the reservation from EC2
// (DescribeCapacityReservations) and acts only on an active Capacity Block that ends within
// the warning's window, with the deadline taken from EC2's end date (see
// controller/capacityblock.go). The deadline computed here is the message's own claim.
const kindCapacityBlock = "capacity block expiration"

// Capacity Block timing, as EC2 documents it.
const (
	capacityBlockWarning         = 10 * time.Minute // from the warning to the first terminations
	capacityBlockTerminateBefore = 30 * time.Minute // terminations begin this long before the end
)

// capacityReservationID is the shape of a capacity reservation id: "cr-" and hex digits.
var capacityReservationID = regexp.MustCompile(`^cr-[0-9a-f]{8,17}$`)

// Reservation is a warning about a capacity reservation: it names no instance. The
// controller looks up this cluster's instances in the reservation and takes Notice(instance)
// for each.
type Reservation struct {
	ID       string    // detail.capacity-reservation-id
	Deadline time.Time // when EC2 begins to terminate its instances
	EndDate  time.Time // detail.end-date; zero when unreadable
}

// Notice is the warning's notice for one instance of the reservation. Its id names the
// instance and the reservation, never a time.
func (r Reservation) Notice(instanceID string) notice.Notice {
	desc := fmt.Sprintf("Capacity Block %s ends: its instances begin to terminate at %s", r.ID, stamp(r.Deadline))
	if !r.EndDate.IsZero() {
		desc += fmt.Sprintf(" (the block ends at %s)", stamp(r.EndDate))
	}
	return notice.Notice{
		ID: notice.ID(notice.CapacityBlockExpiration, instanceID, r.ID), Kind: notice.CapacityBlockExpiration, Source: notice.SourceQueue,
		InstanceID: instanceID, Deadline: r.Deadline, StartTime: r.Deadline, EndTime: r.EndDate, Action: "terminate", Description: desc,
	}
}

// parseCapacityBlock reads the expiration warning: the deadline is the warning's time plus
// ten minutes, or thirty minutes before the end date when that is earlier (a warning that
// arrives late).
func parseCapacityBlock(body string, e envelope, at time.Time) (Result, error) {
	var d struct {
		ReservationID string  `json:"capacity-reservation-id"`
		EndDate       *string `json:"end-date"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, detailError(kindCapacityBlock, err, body)
	}
	switch {
	case d.ReservationID == "":
		return Result{}, fmt.Errorf("%s: missing detail.capacity-reservation-id (body %q)", kindCapacityBlock, clip(body))
	case !capacityReservationID.MatchString(d.ReservationID):
		return Result{}, fmt.Errorf("%s: detail.capacity-reservation-id %q is not a capacity reservation id (body %q)", kindCapacityBlock, clip(d.ReservationID), clip(body))
	}
	r := Reservation{ID: d.ReservationID, Deadline: at.Add(capacityBlockWarning)}
	var res Result
	if d.EndDate != nil {
		end, err := time.Parse(time.RFC3339, *d.EndDate)
		if err != nil {
			res.Warnings = append(res.Warnings, Warning{Problem: problemEndUnreadable,
				Detail: fmt.Sprintf("%s %s: detail.end-date %q is not RFC 3339: the deadline is the warning's time plus ten minutes", kindCapacityBlock, d.ReservationID, clip(*d.EndDate))})
		} else {
			r.EndDate = end
			if t := end.Add(-capacityBlockTerminateBefore); t.Before(r.Deadline) {
				r.Deadline = t
			}
		}
	}
	res.Reservations = []Reservation{r}
	return res, nil
}

// AWS documents both spellings of each.
var _ = register(
	eventKind{source: "aws.ec2", detailTypes: []string{"Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"}, name: kindCapacityBlock, parse: parseCapacityBlock},
	eventKind{source: "aws.ec2", detailTypes: []string{"Capacity Block Delivered", "Capacity Block Reservation Delivered"},
		// A rule for every Capacity Block event delivers it: the block starts, nothing ends.
		ignored:    "a Capacity Block was delivered: its capacity starts, nothing to drain",
		ignoreKind: IgnoreCapacityBlockDelivered, ignoreReason: ReasonCapacityStarts},
)

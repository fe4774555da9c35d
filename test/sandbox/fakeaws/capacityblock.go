// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// A Capacity Block's end, as EC2 announces it forty minutes ahead: the event names the
// reservation, not its instances. AWS documents the detail-type in two spellings; a builder
// for each.

// CapacityBlockExpirationWarning is EC2's warning, sent at at, that the Capacity Block
// reservation ends forty minutes later (its instances begin to terminate ten minutes after
// the warning).
func CapacityBlockExpirationWarning(reservation string, at time.Time) string {
	return capacityBlockWarning("Capacity Block Expiration Warning", reservation, at)
}

// CapacityBlockReservationExpirationWarning is the same warning with the detail-type's other
// documented spelling.
func CapacityBlockReservationExpirationWarning(reservation string, at time.Time) string {
	return capacityBlockWarning("Capacity Block Reservation Expiration Warning", reservation, at)
}

func capacityBlockWarning(detailType, reservation string, at time.Time) string {
	return envelope(reservation+"-approaching-expiry", "aws.ec2", detailType, at,
		[]string{"arn:aws:ec2:us-east-1:" + Account + ":capacity-reservation/" + reservation},
		map[string]string{"capacity-reservation-id": reservation, "end-date": at.Add(40 * time.Minute).UTC().Format(time.RFC3339)})
}

// CapacityBlockDelivered is EC2's event that a Capacity Block's capacity is ready, keyed as
// the EC2 user guide prints it (detail_type, customer_event_id): a rule for every Capacity
// Block event delivers it beside the expiration warning.
func CapacityBlockDelivered(reservation string, at, end time.Time) string {
	return documentedEnvelope(reservation+"-delivered", "Capacity Block Reservation Delivered", at,
		map[string]string{"capacity-reservation-id": reservation, "end-date": end.UTC().Format(time.RFC3339)})
}

// CapacityBlockExpirationWarningDocumented is the expiration warning keyed as the EC2 user
// guide prints it (detail_type, customer_event_id), for a block that ends at end.
func CapacityBlockExpirationWarningDocumented(reservation string, at, end time.Time) string {
	return documentedEnvelope(reservation+"-approaching-expiry", "Capacity Block Reservation Expiration Warning", at,
		map[string]string{"capacity-reservation-id": reservation, "end-date": end.UTC().Format(time.RFC3339)})
}

func documentedEnvelope(id, detailType string, at time.Time, detail map[string]string) string {
	b, err := json.Marshal(map[string]any{
		"customer_event_id": id, "detail_type": detailType, "source": "aws.ec2", "account": Account,
		"time": at.UTC().Format(time.RFC3339), "resources": []string{"arn:aws:ec2:us-east-1:" + Account + ":capacity-reservation/" + detail["capacity-reservation-id"]},
		"detail": detail,
	})
	if err != nil {
		panic(err) // maps of strings: cannot fail
	}
	return string(b)
}

// CapacityReservation is what DescribeCapacityReservations reports of a reservation added
// with AddCapacityReservation.
type CapacityReservation struct {
	ID           string
	Type         string // ReservationType; "" reports capacity-block
	State        string // "" reports active
	InstanceType string // "" reports p5.48xlarge
	EndDate      time.Time
}

// AddCapacityReservation makes EC2 describe a capacity reservation from now on (replacing
// one of the same id: a Capacity Block extended to a later end date).
func (s *Server) AddCapacityReservation(r CapacityReservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reservations == nil {
		s.reservations = map[string]CapacityReservation{}
	}
	s.reservations[r.ID] = r
}

type ec2DescribeCapacityReservationsResponse struct {
	XMLName xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeCapacityReservationsResponse"`
	ec2Meta
	Reservations []ec2CapacityReservation `xml:"capacityReservationSet>item"`
}

type ec2CapacityReservation struct {
	ID              string `xml:"capacityReservationId"`
	InstanceType    string `xml:"instanceType"`
	State           string `xml:"state"`
	ReservationType string `xml:"reservationType"`
	EndDate         string `xml:"endDate,omitempty"`
	EndDateType     string `xml:"endDateType"`
}

// ec2DescribeCapacityReservations answers for the ids named (CapacityReservationId.N) as EC2
// does: an id it does not know fails the whole call with InvalidCapacityReservationId.NotFound.
func (s *Server) ec2DescribeCapacityReservations(p url.Values) (any, error) {
	if p.Get("DryRun") == "true" {
		return nil, &apiError{Status: http.StatusPreconditionFailed, Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &ec2DescribeCapacityReservationsResponse{}
	for i := 1; p.Has(fmt.Sprintf("CapacityReservationId.%d", i)); i++ {
		id := p.Get(fmt.Sprintf("CapacityReservationId.%d", i))
		r, ok := s.reservations[id]
		if !ok {
			return nil, &apiError{Status: http.StatusBadRequest, Code: "InvalidCapacityReservationId.NotFound",
				Message: fmt.Sprintf("The capacity reservation ID '%s' does not exist", id)}
		}
		item := ec2CapacityReservation{ID: r.ID, InstanceType: cmp.Or(r.InstanceType, "p5.48xlarge"), State: cmp.Or(r.State, "active"),
			ReservationType: cmp.Or(r.Type, "capacity-block"), EndDateType: "unlimited"}
		if !r.EndDate.IsZero() {
			item.EndDate, item.EndDateType = r.EndDate.UTC().Format(time.RFC3339), "limited"
		}
		out.Reservations = append(out.Reservations, item)
	}
	return out, nil
}

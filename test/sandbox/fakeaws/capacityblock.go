package fakeaws

import (
	"encoding/json"
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

// Command protobuf-fixtures prints, as JSON of hex strings, objects encoded as client-go encodes them for the API
// server in protobuf: the proxy's unit tests read and rename these bytes (test/unit/fixtures/protobuf.json).
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func encode(object runtime.Object, gv schema.GroupVersion) string {
	serializer := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var out bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(serializer, gv).Encode(object, &out); err != nil {
		panic(err)
	}
	return hex.EncodeToString(out.Bytes())
}

func main() {
	holder := "pod-1_5b1c"
	seconds := int32(15)
	renewed := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "operator-leader", Namespace: "op", Labels: map[string]string{"app": "op"}, ResourceVersion: "42"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &renewed, RenewTime: &renewed},
	}
	configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "op"}, Data: map[string]string{"a": "b"}}
	status := apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "operator-leader").Status()
	fixtures := map[string]string{
		"lease":     encode(lease, coordinationv1.SchemeGroupVersion),
		"configMap": encode(configMap, corev1.SchemeGroupVersion),
		"status":    encode(&status, metav1.SchemeGroupVersion),
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(fixtures); err != nil {
		panic(err)
	}
}

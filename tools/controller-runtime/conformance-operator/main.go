// Command conformance-operator is a small operator written the way kubebuilder scaffolds one, on
// controller-runtime's defaults: leader election on, client-go's protobuf for built-in kinds, a CRD of its own
// (JSON) with a status subresource, finalizers, owner references and events. ControllerMesh's conformance suite
// runs it sharded behind the proxy and judges the shards by what it logs and what it writes.
//
// It reconciles Widgets (conformance.ctrlmesh.dev/v1alpha1, cluster-wide): each gets a finalizer, a child
// ConfigMap `<name>-owned` it controls, an event, and a status naming who reconciled it. A Widget being deleted
// has its child removed and its finalizer taken off. It logs, one JSON line each: when it was elected, when its
// caches synced, every reconcile, and every delete its informers deliver, so a test can tell a real delete from
// a cache that was emptied under it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const finalizer = "conformance.ctrlmesh.dev/cleanup"

var widgetGVK = schema.GroupVersionKind{Group: "conformance.ctrlmesh.dev", Version: "v1alpha1", Kind: "Widget"}

func newWidget() *unstructured.Unstructured {
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(widgetGVK)
	return widget
}

type reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	identity string
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	widget := newWidget()
	if err := r.client.Get(ctx, req.NamespacedName, widget); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-owned"}}
	if !widget.GetDeletionTimestamp().IsZero() {
		if !controllerutil.ContainsFinalizer(widget, finalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.client.Delete(ctx, child); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(widget, finalizer)
		if err := r.client.Update(ctx, widget); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("finalized", "identity", r.identity)
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(widget, finalizer) {
		if err := r.client.Update(ctx, widget); err != nil {
			return ctrl.Result{}, err
		}
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.client, child, func() error {
		child.Data = map[string]string{"reconciledBy": r.identity, "generation": fmt.Sprint(widget.GetGeneration())}
		return controllerutil.SetControllerReference(widget, child, r.client.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	status := map[string]interface{}{"reconciledBy": r.identity, "observedGeneration": widget.GetGeneration()}
	current, _, _ := unstructured.NestedMap(widget.Object, "status")
	if fmt.Sprint(current["reconciledBy"]) != r.identity || fmt.Sprint(current["observedGeneration"]) != fmt.Sprint(widget.GetGeneration()) {
		if err := unstructured.SetNestedMap(widget.Object, status, "status"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.client.Status().Update(ctx, widget); err != nil {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(widget, nil, corev1.EventTypeNormal, "Reconciled", "Reconcile", "reconciled by %s", r.identity)
	}
	log.Info("reconciled", "identity", r.identity)
	return ctrl.Result{}, nil
}

// deletesLogged logs every delete an informer delivers: a test compares them with what still exists.
func deletesLogged(kind string) predicate.Funcs {
	return predicate.Funcs{
		DeleteFunc: func(e event.DeleteEvent) bool {
			ctrl.Log.WithName("informer").Info("observed delete", "kind", kind, "namespace", e.Object.GetNamespace(), "name", e.Object.GetName(), "unknownState", e.DeleteStateUnknown)
			return true
		},
	}
}

// syncTimer logs, once elected, when the caches of both kinds have synced: the time a shard's proxy adds to a start.
type syncTimer struct {
	mgr     ctrl.Manager
	started time.Time
}

func (s *syncTimer) Start(ctx context.Context) error {
	elected := time.Since(s.started)
	ctrl.Log.WithName("timeline").Info("elected", "sinceStartMs", elected.Milliseconds())
	for _, object := range []client.Object{newWidget(), &corev1.ConfigMap{}} {
		if _, err := s.mgr.GetCache().GetInformer(ctx, object); err != nil {
			return err
		}
	}
	if s.mgr.GetCache().WaitForCacheSync(ctx) {
		ctrl.Log.WithName("timeline").Info("caches synced", "sinceStartMs", time.Since(s.started).Milliseconds(), "sinceElectedMs", (time.Since(s.started) - elected).Milliseconds())
	}
	<-ctx.Done()
	return nil
}

func main() {
	started := time.Now()
	var leaderElect bool
	var leaderElectionID, leaderElectionNamespace, metricsAddr, probeAddr, identity string
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader (one active instance per shard)")
	flag.StringVar(&leaderElectionID, "leader-election-id", "conformance-operator-leader", "name of the leader-election Lease")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's own)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "metrics address (0 turns it off)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "health probe address")
	flag.StringVar(&identity, "identity", os.Getenv("POD_NAME"), "who this instance says reconciled an object (default $POD_NAME)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if identity == "" {
		identity, _ = os.Hostname()
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: leaderElectionNamespace,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
	})
	if err != nil {
		ctrl.Log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	r := &reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder("conformance-operator"), identity: identity}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(newWidget(), builder.WithPredicates(deletesLogged("Widget"))).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(deletesLogged("ConfigMap"))).
		Complete(r); err != nil {
		ctrl.Log.Error(err, "unable to set up the controller")
		os.Exit(1)
	}
	if err := mgr.Add(&syncTimer{mgr: mgr, started: started}); err != nil {
		ctrl.Log.Error(err, "unable to add the timeline")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		os.Exit(1)
	}
	ctrl.Log.Info("starting manager", "identity", identity, "leaderElection", leaderElect)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

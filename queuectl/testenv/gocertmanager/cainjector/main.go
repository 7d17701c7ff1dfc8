// Command cainjector runs cert-manager's CA injector (v1.21.2 library package
// pkg/controller/cainjector) as a local process: it copies a Certificate's CA into the caBundle
// of webhook configurations annotated cert-manager.io/inject-ca-from. cert-manager's own
// command lives in a nested Go module the module proxy does not serve, so this builds the
// controller-runtime manager and registers the injectors itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// controller-runtime registers --kubeconfig itself; ctrl.GetConfig reads it.
	flag.Parse()
	logf.InitLogs()
	ctrl.SetLogger(logf.Log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager cainjector:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	config, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// The injectors server-side apply caBundle with a field manager taken from the user agent:
	// an empty one is refused ("fieldManager: Required value").
	config = util.RestConfigWithUserAgent(config, "cainjector")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, cmapi.AddToScheme, apiext.AddToScheme, apireg.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     false,
			cainjector.CustomResourceDefinitionName:       false,
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "cert-manager cainjector: running (webhook configurations)")
	return mgr.Start(ctx)
}

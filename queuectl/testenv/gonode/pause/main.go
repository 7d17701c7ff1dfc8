// Command pause is the real node's sandbox ("pause") image and its test workload, built here
// so that no registry is needed: with no arguments it sleeps until SIGTERM/SIGINT; with
// `serve ADDR` it answers every HTTP request with "ok <hostname>\n" (proves the API server ->
// pod path).
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "serve" {
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "ok %s\n", host)
		})
		go func() {
			if err := http.ListenAndServe(os.Args[2], nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

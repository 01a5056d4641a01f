package httpapi

import (
	"encoding/json"
	"net/http"
)

func healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

func (a *API) ready(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	if why := a.o.NotReady(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(why + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(a.o.Status())
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	writeBody(w, http.StatusOK, "application/json", append(b, '\n'))
}

func (a *API) metrics(w http.ResponseWriter, r *http.Request) { a.o.Metrics.ServeHTTP(w, r) }

// openapi serves the OpenAPI document of this API (openapi.json).
func openapi(w http.ResponseWriter, r *http.Request) {
	writeBody(w, http.StatusOK, "application/json", OpenAPI)
}

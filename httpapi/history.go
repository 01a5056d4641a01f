package httpapi

import (
	"encoding/json"
	"net/http"
)

// history serves GET /v1/status/history: the console's samples of the
// last hour (Options.History), as JSON.
func (a *API) history(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(a.o.History())
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	writeBody(w, http.StatusOK, "application/json", append(b, '\n'))
}

package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path under which Handler serves the page.
const Prefix = "/ui/"

// Handler serves the console's static files under Prefix ("/ui/" is the
// page; "/ui" redirects there). The files are public: they carry no data,
// and every API call the page makes carries the token itself.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil { // the embed directive guarantees the directory
		return http.NotFoundHandler()
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		// The page loads nothing from elsewhere: say so to the browser,
		// so that an injected script or style from a change's values
		// (rendered as text anyway) could not run or call out.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

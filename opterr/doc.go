// Package opterr carries the errors of pgq's library packages that a
// setting can mend, in the library's own terms: which option (by its Go
// name, "ingest.Options.CreateSlot") and what to do with it. A program
// embedding package server reads them as they are (Error names Go
// options); the pgq CLI renders the same error in its flags' and
// environment variables' terms (one table in cmd/pgq), so no library
// message names a flag a program does not have.
//
// An Error's Text holds one placeholder per option, in order: "{}" for the
// option's name, "{+env}" where a CLI would name its environment variable
// too (the Go rendering names the option only). Errors wrap a sentinel
// (Err), so errors.Is keeps telling the classes apart.
package opterr

module github.com/sextant/sextant

go 1.26.8

require github.com/mattn/go-sqlite3 v1.14.53 // indirect

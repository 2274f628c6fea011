module github.com/zerolayer/zerolayer

go 1.26.8

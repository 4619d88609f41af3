//go:build !unix

package main

func privateUmask() {}

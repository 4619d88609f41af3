// Package schema owns the writ meta-schema: the CUE definitions (#Schema,
// #Entry, #Machine, #To, #NodeConfig) that fix what a declaration may say.
// Loading a user schema unifies it with #Schema, so a declaration that breaks
// the meta-schema is rejected by CUE itself with file:line:col. This package
// only embeds the .cue source; it imports no other package of the module.
package schema

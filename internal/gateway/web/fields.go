package web

import (
	"fmt"
	"reflect"
	"text/template/parse"
)

// modelType is what a page's template is executed with.
var modelType = reflect.TypeFor[*Model]()

// CheckFields reports the first field or method that page's template
// names on the Model and the Model lacks: on its dot where the dot's type
// is known (the page's own dot, and inside with and range over the
// Model's fields), on $ anywhere in it, and in the templates it defines
// (others, by name) where it calls them with such a dot. The error names
// the file, line and column.
//
// Executing the template against every state (the gateway does, at load)
// finds the same mistakes in the branches those states take; this finds
// them in every branch, such as a state's only in some event's config.
// What it cannot type (a variable, a function's result) it leaves to
// execution: a page whose template fails on a request is drawn in the
// built-in look instead.
func CheckFields(page *parse.Tree, others map[string]*parse.Tree) error {
	c := &fieldCheck{others: others, seen: map[string]bool{}}
	c.tree = page
	c.list(page.Root, modelType)
	return c.err
}

type fieldCheck struct {
	tree   *parse.Tree
	others map[string]*parse.Tree
	seen   map[string]bool // templates already checked with a type: name and type
	err    error
}

func (c *fieldCheck) list(l *parse.ListNode, dot reflect.Type) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.node(n, dot)
	}
}

func (c *fieldCheck) node(n parse.Node, dot reflect.Type) {
	if c.err != nil {
		return
	}
	switch x := n.(type) {
	case *parse.ActionNode:
		c.pipe(x.Pipe, dot)
	case *parse.IfNode:
		c.pipe(x.Pipe, dot)
		c.list(x.List, dot)
		c.list(x.ElseList, dot)
	case *parse.WithNode:
		c.pipe(x.Pipe, dot)
		c.list(x.List, c.typeOf(x.Pipe, dot))
		c.list(x.ElseList, dot)
	case *parse.RangeNode:
		c.pipe(x.Pipe, dot)
		c.list(x.List, elemOf(c.typeOf(x.Pipe, dot)))
		c.list(x.ElseList, dot)
	case *parse.TemplateNode:
		c.pipe(x.Pipe, dot)
		tree, ok := c.others[x.Name]
		if !ok || x.Pipe == nil {
			return
		}
		t := c.typeOf(x.Pipe, dot)
		key := x.Name + " " + fmt.Sprint(t)
		if t == nil || c.seen[key] {
			return
		}
		c.seen[key] = true
		outer := c.tree
		c.tree = tree
		c.list(tree.Root, t)
		c.tree = outer
	}
}

func (c *fieldCheck) pipe(p *parse.PipeNode, dot reflect.Type) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			c.arg(arg, dot)
		}
	}
}

// arg checks one argument and returns its type (nil: not known).
func (c *fieldCheck) arg(n parse.Node, dot reflect.Type) reflect.Type {
	if c.err != nil {
		return nil
	}
	switch x := n.(type) {
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		return c.fields(n, dot, x.Ident)
	case *parse.VariableNode:
		if x.Ident[0] == "$" {
			return c.fields(n, modelType, x.Ident[1:])
		}
	case *parse.ChainNode:
		var t reflect.Type
		switch y := x.Node.(type) {
		case *parse.PipeNode:
			c.pipe(y, dot)
			t = c.typeOf(y, dot)
		default:
			t = c.arg(y, dot)
		}
		return c.fields(n, t, x.Field)
	case *parse.PipeNode:
		c.pipe(x, dot)
		return c.typeOf(x, dot)
	}
	return nil
}

// typeOf is what pipe p gives: known when it is one argument (a field, a
// variable $, a chain of fields), nil otherwise.
func (c *fieldCheck) typeOf(p *parse.PipeNode, dot reflect.Type) reflect.Type {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return nil
	}
	switch p.Cmds[0].Args[0].(type) {
	case *parse.DotNode, *parse.FieldNode, *parse.VariableNode, *parse.ChainNode:
		// Checked already by pipe: errors are not reported twice.
		saved := c.err
		t := c.arg(p.Cmds[0].Args[0], dot)
		c.err = saved
		return t
	}
	return nil
}

// fields follows names from t, as text/template would, and notes the
// first one t lacks.
func (c *fieldCheck) fields(n parse.Node, t reflect.Type, names []string) reflect.Type {
	for _, name := range names {
		if t == nil {
			return nil
		}
		if m, ok := t.MethodByName(name); ok {
			t = resultOf(m.Type)
			continue
		}
		if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface {
			if m, ok := reflect.PointerTo(t).MethodByName(name); ok {
				t = resultOf(m.Type)
				continue
			}
		}
		base := t
		for base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		switch base.Kind() {
		case reflect.Struct:
			f, ok := base.FieldByName(name)
			if !ok || !f.IsExported() {
				c.fail(n, name, t)
				return nil
			}
			t = f.Type
		case reflect.Map:
			t = base.Elem()
		case reflect.Interface:
			return nil
		default:
			c.fail(n, name, t)
			return nil
		}
	}
	return t
}

func (c *fieldCheck) fail(n parse.Node, name string, t reflect.Type) {
	if c.err != nil {
		return
	}
	loc, _ := c.tree.ErrorContext(n)
	c.err = fmt.Errorf("%s: the model has no .%s here (in %s; docs/PAGES.md lists what it has)", loc, name, t)
}

// resultOf is a method's first result (nil for none).
func resultOf(m reflect.Type) reflect.Type {
	if m.NumOut() == 0 {
		return nil
	}
	return m.Out(0)
}

// elemOf is what range over a value of t gives each turn (nil: not
// known).
func elemOf(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Chan:
		return t.Elem()
	}
	return nil
}
